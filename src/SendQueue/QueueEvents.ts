/**
 * The queue's outcomes told as hub events (issue 32): when a queued send is made or given up, an event
 * of kind `hub.message_queue` is stored for its instance and delivered, signed and retried like every
 * delivery, to the webhooks that name that kind in their `events` (only those: a receiver written for
 * Meta's payloads does not get the hub's own unasked), and heard on the live event streams.
 *
 * The body: {"object":"hub.message_queue","entry":[{"id":"<instance id>","time":<unix seconds>,"changes":[{"field":
 * "hub.message_queue","value":{"message_id":"msg_…","instance_id":"ins_…","phone_number_id":"…","to":"…",
 * "status":"sent"|"failed","wa_message_id"?:"wamid.…","failure_reason"?:"…","error"?:{…},"attempts":1,"at":"<ISO 8601>"}}]}]}
 */
import { Effect } from "effect"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Enqueue } from "../Delivery/Enqueue.js"
import { OutboxRepo } from "../Delivery/Outbox.js"
import type { EventRecord } from "../Delivery/Records.js"
import { QUEUE_EVENT_KIND } from "../Domain/EventKinds.js"
import { newId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"
import type { FailureReason } from "../Domain/Vocabulary.js"
import { LiveEvents } from "../LiveEvents/LiveEvents.js"
import { WriteBatcher, written } from "../Sql/WriteBatcher.js"
import { type Finish, SendQueueRepo } from "./Repo.js"

/** What became of a queued send. */
type QueueOutcome =
  | { readonly status: "sent"; readonly waMessageId: string | undefined }
  | { readonly status: "failed"; readonly reason: FailureReason; readonly error: JsonObject | undefined }

/** The queued send an outcome is of. */
export interface QueuedSendRef {
  readonly messageId: string
  readonly organizationId: string
  readonly instanceId: string
  readonly phoneNumberId: string
  readonly to: string
  readonly attempts: number
}

const eventOf = (send: QueuedSendRef, outcome: QueueOutcome, at: Date): EventRecord => {
  const value: JsonObject = {
    message_id: send.messageId,
    instance_id: send.instanceId,
    phone_number_id: send.phoneNumberId,
    to: send.to,
    status: outcome.status,
    ...(outcome.status === "sent"
      ? outcome.waMessageId === undefined ? {} : { wa_message_id: outcome.waMessageId }
      : { failure_reason: outcome.reason, ...(outcome.error === undefined ? {} : { error: outcome.error }) }),
    attempts: send.attempts,
    at: at.toISOString()
  }
  const body = JSON.stringify({
    object: QUEUE_EVENT_KIND,
    entry: [{
      id: send.instanceId,
      time: Math.floor(at.getTime() / 1000),
      changes: [{ field: QUEUE_EVENT_KIND, value }]
    }]
  })
  return {
    id: newId("evt"),
    instanceId: send.instanceId,
    body,
    changeCount: 1,
    filterable: { changes: [{ field: QUEUE_EVENT_KIND, value }], bodyOf: () => body },
    onlyToNamed: QUEUE_EVENT_KIND
  }
}

/** One outcome to tell, and the queue's own writes of it (`finish`: the send's row taken out). */
interface Telling {
  readonly send: QueuedSendRef
  readonly outcome: QueueOutcome
  readonly finish: Finish | undefined
}

export class QueueEvents extends Effect.Service<QueueEvents>()("QueueEvents", {
  effect: Effect.gen(function*() {
    const outbox = yield* OutboxRepo
    const enqueue = yield* Enqueue
    const batcher = yield* WriteBatcher
    const signal = yield* DispatchSignal
    const live = yield* LiveEvents
    const queue = yield* SendQueueRepo

    /**
     * A group's outcomes, their events and deliveries with the queue's writes of them, a statement or
     * a few per table for the group. It gathers (Sql/WriteBatcher.ts): paced sends end one at a time,
     * and each outcome in a commit of its own was an fsync a send on SQLite (638 µs each, a third of
     * the drain's time with 50 numbers: docs/PERFORMANCE.md); nobody waits on it but the queue itself.
     * Timed inside its transaction, as the ingress's events are: on SQLite's one writer, the order
     * events arrived in is then the order they committed in, which a poll's cursor relies on.
     */
    const tellAll = batcher.groupNow((tellings: ReadonlyArray<Telling>) =>
      Effect.gen(function*() {
        const at = new Date()
        const events = tellings.map(({ outcome, send }) => eventOf(send, outcome, at))
        yield* queue.finishAll(tellings.flatMap(({ finish }) => (finish === undefined ? [] : [finish])))
        yield* outbox.insertEvents(events, at.toISOString())
        const counts = yield* enqueue.events(events, at.toISOString(), undefined, [])
        return events.map((event) => ({ event, deliveries: counts.get(event.id) ?? 0 }))
      }), { gathers: true })

    /**
     * Stores the outcome's event and its deliveries, with `finish` (the send's row taken out, when it
     * is still queued), in one transaction; then the dispatcher and the live streams hear.
     */
    const told = (send: QueuedSendRef, outcome: QueueOutcome, finish: Finish | undefined) =>
      Effect.gen(function*() {
        const { deliveries, event } = yield* Effect.flatten(
          Effect.promise(() => written(tellAll, { send, outcome, finish }))
        )
        if (deliveries > 0) signal.notify()
        live.publish([{
          id: event.id,
          instanceId: event.instanceId,
          body: event.body,
          changes: [{ route: { organization_id: send.organizationId } }]
        }])
      })

    return { told } as const
  }),
  dependencies: [SendQueueRepo.Default]
}) {}

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
import type { SqlError } from "@effect/sql"
import { Effect, Exit } from "effect"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Enqueue } from "../Delivery/Enqueue.js"
import type { EventRecord } from "../Delivery/Records.js"
import { QUEUE_EVENT_KIND } from "../Domain/EventKinds.js"
import { newId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"
import type { FailureReason } from "../Domain/Vocabulary.js"
import { LiveEvents } from "../LiveEvents/LiveEvents.js"
import { MessagesRepo } from "../Messages/Repo.js"
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

/** One outcome to tell, and the writes that go with it. */
export interface Telling {
  readonly send: QueuedSendRef
  readonly outcome: QueueOutcome
  /** The send's row taken out of the queue, when it is still there. */
  readonly finish: Finish | undefined
  /** Meta's id for the send, to store in its record: Meta took it just now. */
  readonly accepted?: string
}

export class QueueEvents extends Effect.Service<QueueEvents>()("QueueEvents", {
  effect: Effect.gen(function*() {
    const enqueue = yield* Enqueue
    const batcher = yield* WriteBatcher
    const signal = yield* DispatchSignal
    const live = yield* LiveEvents
    const queue = yield* SendQueueRepo
    const messages = yield* MessagesRepo

    /**
     * A group's outcomes, their events and deliveries with the queue's writes of them and the records'
     * acceptances, a statement or a few per table for the group. It gathers (Sql/WriteBatcher.ts): paced
     * sends end one at a time, and each outcome in a commit of its own was an fsync a send on SQLite
     * (638 µs each, a third of the drain's time with 50 numbers: docs/PERFORMANCE.md); an acceptance
     * written apart began a commit of its own, cutting the gathering short. Nobody waits on it but the
     * queue itself. Timed inside its transaction, as the ingress's events are: on SQLite's one writer,
     * the order events arrived in is then the order they committed in, which a poll's cursor relies on.
     */
    const tellAll = batcher.groupNow((tellings: ReadonlyArray<Telling>) =>
      Effect.gen(function*() {
        const at = new Date()
        const events = tellings.map(({ outcome, send }) => eventOf(send, outcome, at))
        yield* messages.acceptAll(tellings.flatMap(({ accepted, send }) =>
          accepted === undefined ? [] : [{ id: send.messageId, waMessageId: accepted }]
        ))
        yield* queue.finishAll(tellings.flatMap(({ finish }) => (finish === undefined ? [] : [finish])))
        // The events' rows are written with their deliveries (one statement on PostgreSQL), as the ingress's are.
        const counts = yield* enqueue.events(events, at.toISOString(), undefined, [], { writeEvents: true })
        return events.map((event) => ({ event, deliveries: counts.get(event.id) ?? 0 }))
      }), { gathers: true })

    /**
     * Stores the outcome's event and its deliveries with the writes that go with it, in one
     * transaction; then the dispatcher and the live streams hear. Plain, for the queue's send (see
     * SendQueue/LeasedSends.ts): the failure is in the answer.
     */
    const tellNow = async (telling: Telling): Promise<Exit.Exit<void, SqlError.SqlError>> => {
      const stored = await written(tellAll, telling)
      if (Exit.isFailure(stored)) return stored
      const { deliveries, event } = stored.value
      if (deliveries > 0) signal.notify()
      live.publish([{
        id: event.id,
        instanceId: event.instanceId,
        body: event.body,
        changes: [{ route: { organization_id: telling.send.organizationId } }]
      }])
      return Exit.void
    }

    return {
      tellNow,
      /** tellNow, as an effect. */
      told: (telling: Telling) => Effect.flatten(Effect.promise(() => tellNow(telling)))
    } as const
  }),
  dependencies: [SendQueueRepo.Default]
}) {}

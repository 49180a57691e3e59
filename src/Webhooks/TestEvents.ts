/**
 * Test events (POST /api/webhooks/{id}/test): a small signed event of kind `hub.test`, sent through
 * the normal delivery path (an event row and a delivery, handed to the dispatcher or leased by it,
 * attempted and logged like any other), answered with the delivery once its first attempt is
 * logged, or as it stands after the webhook timeout. At most one test per webhook a second; an
 * Idempotency-Key repeated within 10 minutes answers the first test's delivery instead of sending
 * another (kept in memory: a restart forgets the keys).
 *
 * The body: {"object":"hub.test","entry":[{"id":"<instance id>","time":<unix seconds>,"changes":[{"field":"hub.test",
 * "value":{"webhook_id":"whk_…","instance_id":"ins_…","event_id":"evt_…","message":"…","sent_at":"<ISO 8601>"}}]}]}
 */
import { Duration, Effect, Exit } from "effect"
import { HubConfig } from "../Config.js"
import { newId } from "../Domain/Ids.js"
import { DeliveryWatch } from "../Delivery/DeliveryWatch.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Handoff } from "../Delivery/Handoff.js"
import { type EventRecord, type LeasedDelivery, OutboxRepo } from "../Delivery/Outbox.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"

/** The `object` (and change `field`) of a test event. */
export const TEST_EVENT_KIND = "hub.test"

const MIN_INTERVAL_MS = 1_000
const KEY_WINDOW_MS = 10 * 60_000
/** Most webhooks and keys remembered; past it the oldest are forgotten first. */
const REMEMBERED = 10_000

export const testEventBody = (input: { readonly webhookId: string; readonly instanceId: string; readonly eventId: string; readonly at: Date }) =>
  JSON.stringify({
    object: TEST_EVENT_KIND,
    entry: [{
      id: input.instanceId,
      time: Math.floor(input.at.getTime() / 1000),
      changes: [{
        field: TEST_EVENT_KIND,
        value: {
          webhook_id: input.webhookId,
          instance_id: input.instanceId,
          event_id: input.eventId,
          message: "A test event from Messaging Hub: this endpoint receives and verifies its deliveries.",
          sent_at: input.at.toISOString()
        }
      }]
    }]
  })

/** What a test call may do now: answer an earlier test's delivery, wait `retryAfterMs`, or send. */
export type TestAdmission =
  | { readonly _tag: "Repeat"; readonly deliveryId: string }
  | { readonly _tag: "TooSoon"; readonly retryAfterMs: number }
  | { readonly _tag: "Send"; readonly deliveryId: string }

/** Drops the oldest entries of a Map (insertion order) beyond REMEMBERED. */
const bounded = <K, V>(map: Map<K, V>) => {
  for (const key of map.keys()) {
    if (map.size <= REMEMBERED) return
    map.delete(key)
  }
}

export const makeTestEvents = Effect.gen(function*() {
  const config = yield* HubConfig
  const outbox = yield* OutboxRepo
  const batcher = yield* WriteBatcher
  const handoff = yield* Handoff
  const signal = yield* DispatchSignal
  const watch = yield* DeliveryWatch
  const lastTest = new Map<string, number>()
  const keys = new Map<string, { readonly deliveryId: string; readonly at: number }>()
  // The attempt is bounded by the webhook timeout; the second covers the round that logs it.
  const waitBound = Duration.sum(config.webhookTimeout, Duration.seconds(1))

  const admit = (webhookId: string, key: string | undefined, nowMs: number): TestAdmission => {
    const known = key === undefined ? undefined : keys.get(`${webhookId} ${key}`)
    if (known !== undefined && nowMs - known.at < KEY_WINDOW_MS) return { _tag: "Repeat", deliveryId: known.deliveryId }
    const last = lastTest.get(webhookId)
    if (last !== undefined && nowMs - last < MIN_INTERVAL_MS) return { _tag: "TooSoon", retryAfterMs: MIN_INTERVAL_MS - (nowMs - last) }
    const deliveryId = newId("dlv")
    lastTest.delete(webhookId)
    lastTest.set(webhookId, nowMs)
    bounded(lastTest)
    if (key !== undefined) {
      keys.set(`${webhookId} ${key}`, { deliveryId, at: nowMs })
      bounded(keys)
    }
    return { _tag: "Send", deliveryId }
  }

  /** Waits (bounded) for the next logged attempt of a delivery that `start` queues; false if `start` queued nothing. */
  const sendAndWait = (deliveryId: string, start: Effect.Effect<boolean>) =>
    Effect.scoped(Effect.gen(function*() {
      const logged = yield* watch.watch(deliveryId)
      if (!(yield* start)) return false
      yield* Effect.timeoutOption(logged, waitBound)
      return true
    }))

  /** Writes the test event and its delivery, hands it to the dispatcher if it admits it, and waits for its attempt. */
  const send = (webhook: { readonly id: string; readonly instance_id: string }, deliveryId: string) => {
    const at = new Date()
    const now = at.toISOString()
    const eventId = newId("evt")
    const event: EventRecord = {
      id: eventId,
      instanceId: webhook.instance_id,
      body: testEventBody({ webhookId: webhook.id, instanceId: webhook.instance_id, eventId, at }),
      changeCount: 1
    }
    const start = Effect.gen(function*() {
      const handedOver: Array<LeasedDelivery> = []
      const intake = handoff.intake()
      const written = yield* Effect.exit(batcher.run(Effect.zipRight(
        outbox.insertEvents([event], now),
        outbox.enqueueTo(
          webhook.id,
          event,
          deliveryId,
          now,
          intake === undefined
            ? undefined
            : { owner: intake.owner, leaseUntil: new Date(Date.now() + intake.leaseMs).toISOString(), admit: intake.admit, admitted: handedOver }
        )
      )))
      if (Exit.isFailure(written)) {
        intake?.releaseUncommitted(handedOver)
        return yield* Effect.orDie(written)
      }
      if (intake !== undefined && handedOver.length > 0) yield* intake.startCommitted(handedOver)
      else if (written.value) yield* signal.notify
      return written.value
    })
    return sendAndWait(deliveryId, start)
  }

  /** For a repeated key: waits (bounded) for the delivery's first attempt unless `attempted` says one is logged. */
  const awaitFirst = (deliveryId: string, attempted: Effect.Effect<boolean>) =>
    sendAndWait(deliveryId, Effect.map(attempted, (logged) => !logged)).pipe(Effect.asVoid)

  return { admit, send, awaitFirst }
})

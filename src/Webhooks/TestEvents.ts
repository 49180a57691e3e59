/**
 * Test events (POST /api/webhooks/{id}/test): a small signed event of kind `hub.test`, sent through
 * the normal delivery path (an event row and a delivery, handed to the dispatcher or leased by it,
 * attempted and logged like any other), answered with the delivery once its first attempt is
 * logged, or as it stands after the webhook timeout. At most one test per webhook a second; an
 * Idempotency-Key repeated within 10 minutes answers the first test's delivery instead of sending
 * another (the keys are Sql/IdempotencyKeys.ts's, as sends' are). Both are kept in the database
 * (`webhooks.last_test_at`, `webhook_tests`: migration 0012) and decided in the transaction that
 * writes the test, so they hold for a fleet of replicas.
 *
 * The body: {"object":"hub.test","entry":[{"id":"<instance id>","time":<unix seconds>,"changes":[{"field":"hub.test",
 * "value":{"webhook_id":"whk_…","instance_id":"ins_…","event_id":"evt_…","message":"…","sent_at":"<ISO 8601>"}}]}]}
 */
import { SqlClient } from "@effect/sql"
import { Cause, Data, Duration, Effect, Exit, Option, Schedule, Schema } from "effect"
import { HubConfig } from "../Config.js"
import { DeliveryWatch } from "../Delivery/DeliveryWatch.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Enqueue } from "../Delivery/Enqueue.js"
import { Handoff } from "../Delivery/Handoff.js"
import { OutboxRepo } from "../Delivery/Outbox.js"
import type { EventRecord, LeasedDelivery } from "../Delivery/Records.js"
import { TEST_EVENT_KIND } from "../Domain/EventKinds.js"
import { newId } from "../Domain/Ids.js"
import { isPostgres } from "../Sql/Dialect.js"
import { type KeyKind, keysOf } from "../Sql/IdempotencyKeys.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"

const MIN_INTERVAL_MS = 1_000

/** A test's key: held per webhook for 10 minutes, with the delivery of the test it sent (Sql/IdempotencyKeys.ts). */
const TestKeyHeld = Schema.Struct({ delivery_id: Schema.String })
const testEventKeys: KeyKind<typeof TestKeyHeld.Type, typeof TestKeyHeld.Encoded> = {
  table: "webhook_tests",
  scopeColumn: "webhook_id",
  window: Duration.minutes(10),
  held: TestKeyHeld,
  columns: ["delivery_id"]
}

const testEventBody = (
  input: { readonly webhookId: string; readonly instanceId: string; readonly eventId: string; readonly at: Date }
) =>
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

/** How often a repeated test asks whether another replica has logged the delivery's attempt. */
const REPEAT_CHECK = Duration.millis(200)

/** What a test call did: answered an earlier test's delivery, was refused for `retryAfterMs`, or sent one. */
type TestOutcome =
  | { readonly _tag: "Repeat"; readonly deliveryId: string }
  | { readonly _tag: "TooSoon"; readonly retryAfterMs: number }
  | { readonly _tag: "Sent"; readonly deliveryId: string }
  /** The webhook was deactivated or deleted meanwhile: nothing was written. */
  | { readonly _tag: "Inactive" }

/** Rolls the test's transaction back when its webhook can no longer take a delivery. */
class WebhookGone extends Data.TaggedError("WebhookGone") {}

type TestKeys = ReturnType<typeof keysOf<typeof TestKeyHeld.Type, typeof TestKeyHeld.Encoded>>

/** The webhook a test is sent to. */
interface TestedWebhook {
  readonly id: string
  readonly instance_id: string
}

/** The test's event row: one change, of kind TEST_EVENT_KIND. */
const testEventRecord = (webhook: TestedWebhook, eventId: string, at: Date): EventRecord => ({
  id: eventId,
  instanceId: webhook.instance_id,
  body: testEventBody({ webhookId: webhook.id, instanceId: webhook.instance_id, eventId, at }),
  changeCount: 1
})

/**
 * Decides, inside the transaction that would write the test: a key seen within its window answers
 * its delivery; a webhook tested within the second is refused (its row's update also makes two
 * replicas' concurrent tests take turns, the second then refused).
 */
const admit = (sql: SqlClient.SqlClient, keys: TestKeys, webhookId: string, key: string | undefined, at: Date) =>
  Effect.gen(function*() {
    const nowMs = at.getTime()
    if (key !== undefined) {
      const known = yield* keys.find({ scope: webhookId, key }, at)
      if (Option.isSome(known)) return { _tag: "Repeat", deliveryId: known.value.delivery_id } satisfies TestOutcome
    }
    const claimed = yield* sql`UPDATE webhooks SET last_test_at = ${at.toISOString()}
      WHERE id = ${webhookId} AND (last_test_at IS NULL OR last_test_at <= ${
      new Date(nowMs - MIN_INTERVAL_MS).toISOString()
    }) RETURNING id`
    if (claimed.length > 0) return undefined
    const [last] = yield* sql<
      { readonly last_test_at: string | null }
    >`SELECT last_test_at FROM webhooks WHERE id = ${webhookId}`
    const lastMs = last?.last_test_at == null ? nowMs : Date.parse(last.last_test_at)
    return { _tag: "TooSoon", retryAfterMs: Math.max(1, MIN_INTERVAL_MS - (nowMs - lastMs)) } satisfies TestOutcome
  })

/**
 * Takes the key for the test's delivery; the webhook's keys past their window go at the same time.
 * No other test can hold the key here (an admitted test holds its webhook's row until it commits);
 * were one to, its delivery answers, and a key that changed hands meanwhile is refused as a second
 * test within the second is.
 */
const rememberKey = (keys: TestKeys, webhookId: string, key: string, deliveryId: string, at: Date) =>
  Effect.gen(function*() {
    yield* keys.purge(at, webhookId)
    const claim = yield* keys.claim({ scope: webhookId, key }, { delivery_id: deliveryId }, at)
    switch (claim._tag) {
      case "Claimed":
        return undefined
      case "Held":
        return { _tag: "Repeat", deliveryId: claim.held.delivery_id } satisfies TestOutcome
      case "Busy":
        return { _tag: "TooSoon", retryAfterMs: MIN_INTERVAL_MS } satisfies TestOutcome
    }
  })

export class TestEvents extends Effect.Service<TestEvents>()("TestEvents", {
  effect: Effect.gen(function*() {
    const config = yield* HubConfig
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* OutboxRepo
    const enqueue = yield* Enqueue
    const batcher = yield* WriteBatcher
    const handoff = yield* Handoff
    const signal = yield* DispatchSignal
    const watch = yield* DeliveryWatch
    const keys = keysOf(sql, testEventKeys)
    // A fleet of replicas shares PostgreSQL; SQLite is one process.
    const fleet = isPostgres(sql)
    // The attempt is bounded by the webhook timeout; the second covers the round that logs it.
    const waitBound = Duration.sum(config.webhookTimeout, Duration.seconds(1))

    /** Runs `start` with the delivery's next logged attempt watched, then waits for it (bounded) if `coming` says one is. */
    const watching = <A>(deliveryId: string, start: Effect.Effect<A>, coming: (started: A) => boolean) =>
      Effect.scoped(Effect.gen(function*() {
        const logged = yield* watch.watch(deliveryId)
        const started = yield* start
        if (coming(started)) yield* Effect.timeoutOption(logged, waitBound)
        return started
      }))

    /**
     * Admits the test and writes it with its event and delivery in one transaction, hands the delivery
     * to the dispatcher if it admits it, and waits (bounded) for its first logged attempt.
     */
    const test = (webhook: TestedWebhook, key: string | undefined) => {
      const deliveryId = newId("dlv")
      const start = Effect.gen(function*() {
        const at = new Date()
        const now = at.toISOString()
        const event = testEventRecord(webhook, newId("evt"), at)
        const handedOver: Array<LeasedDelivery> = []
        const intake = handoff.intake()
        const written = yield* Effect.exit(batcher.run(Effect.gen(function*() {
          const refused = yield* admit(sql, keys, webhook.id, key, at)
          if (refused !== undefined) return refused
          const held = key === undefined ? undefined : yield* rememberKey(keys, webhook.id, key, deliveryId, at)
          if (held !== undefined) return held
          yield* outbox.insertEvents([event], now)
          const queued = yield* enqueue.toWebhook(webhook.id, event, deliveryId, now, intake, handedOver)
          if (!queued) return yield* Effect.fail(new WebhookGone())
          return { _tag: "Sent", deliveryId } satisfies TestOutcome
        })))
        if (Exit.isFailure(written)) {
          intake?.releaseUncommitted(handedOver)
          if (Option.exists(Cause.failureOption(written.cause), (error) => error instanceof WebhookGone)) {
            return { _tag: "Inactive" } satisfies TestOutcome
          }
          return yield* Effect.orDie(written)
        }
        const outcome: TestOutcome = written.value
        if (outcome._tag !== "Sent") return outcome
        if (intake !== undefined && handedOver.length > 0) yield* intake.startCommitted(handedOver)
        else signal.notify()
        return outcome
      })
      return watching(deliveryId, start, (outcome) => outcome._tag === "Sent")
    }

    /**
     * For a repeated key: waits (bounded) for the delivery's first attempt unless `attempted` says one is
     * logged. On SQLite this process's signal says so; on PostgreSQL the attempt may be another
     * replica's, which no signal of this process reports: the database is asked again every REPEAT_CHECK.
     */
    const awaitFirst = (deliveryId: string, attempted: Effect.Effect<boolean>) =>
      Effect.scoped(Effect.gen(function*() {
        const logged = yield* watch.watch(deliveryId)
        if (yield* attempted) return
        // SQLite is one process: this process's signal is the only one. A fleet also asks the database.
        if (!fleet) return yield* Effect.timeoutOption(logged, waitBound)
        const elsewhere = Effect.repeat(attempted, { until: (done) => done, schedule: Schedule.spaced(REPEAT_CHECK) })
        yield* Effect.timeoutOption(Effect.race(logged, Effect.asVoid(elsewhere)), waitBound)
      }))

    return { test, awaitFirst }
  })
}) {}

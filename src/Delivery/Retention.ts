/**
 * Retention: what the hub no longer needs is deleted once older than HUB_RETENTION: finished
 * deliveries (succeeded, dead, cancelled) with their attempts, events no delivery refers to any more
 * with their dedupe keys, unrouted changes, early status events no send ever claimed, and webhooks'
 * hourly delivery counts (but each webhook's latest success, its last_success_at), replays' records,
 * and the send queue's sampled depths (Stats/QueueDepthSampler.ts). Message
 * records are the customer's history and are kept. Ids are time-ordered (a prefix and a UUIDv7), so
 * "older than" is a primary-key range; deletes go in small batches so the single SQLite connection
 * is never held long.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import { idFloor } from "../Domain/Ids.js"
import { compactMessageCounts } from "../Messages/Repo.js"
import { isPostgres, skipLocked } from "../Sql/Dialect.js"
import { runForFleet } from "../Sql/FleetJobs.js"
import { minuteOf, pruneDepthSamples } from "../Stats/Repo.js"

const BATCH = 500

interface PruneCounts {
  readonly deliveries: number
  readonly events: number
  readonly unrouted: number
  readonly earlyStatuses: number
  readonly deliveryCounts: number
  /** Idempotency-Keys of webhook tests (kept 10 minutes; each new test drops its webhook's older ones, this the rest). */
  readonly testKeys: number
  /** Replays' records and Idempotency-Keys (their deliveries go as the others do). */
  readonly replays: number
  readonly depthSamples: number
}

interface RetentionShape {
  /** Deletes what was finished before `cutoffMillis` (epoch milliseconds). */
  readonly prune: (cutoffMillis: number) => Effect.Effect<PruneCounts>
}

export class Retention extends Effect.Service<Retention>()("Retention", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * A step that fails is logged and counts none this pass: the others still run (each step is its
     * own transactions), and it is tried again next pass. A step that failed the whole pass would have
     * kept every later one from running, every hour, while its cause lasted.
     */
    const step = <E>(name: keyof PruneCounts, work: Effect.Effect<number, E>) =>
      Effect.catchAllCause(work, (cause) =>
        Effect.as(
          Effect.logError(
            `Retention could not prune ${name}; the other steps ran, this one runs again next pass`,
            cause
          ),
          0
        ))

    /** Repeats a batch (one transaction each) until it deletes less than a full batch; returns the total. */
    const inBatches = <E>(batch: Effect.Effect<number, E>) =>
      Effect.iterate({ total: 0, last: BATCH }, {
        while: (state) => state.last === BATCH,
        body: (state) => Effect.map(batch, (last) => ({ total: state.total + last, last }))
      }).pipe(Effect.map((state) => state.total))

    // Each batch reads its ids once and deletes by them: read twice (once per DELETE), a row finished
    // meanwhile by another process could be in the second read only, its attempts left behind.
    const deliveries = (below: string) =>
      sql.withTransaction(Effect.gen(function*() {
        const finished = (yield* sql<{ readonly id: string }>`SELECT id FROM deliveries
          WHERE id < ${below} AND status IN ('succeeded', 'dead', 'cancelled') ORDER BY id LIMIT ${BATCH}`).map((row) =>
          row.id
        )
        if (finished.length === 0) return 0
        yield* sql`DELETE FROM delivery_attempts WHERE ${sql.in("delivery_id", finished)}`
        return (yield* sql<{ readonly id: string }>`DELETE FROM deliveries WHERE ${
          sql.in("id", finished)
        } RETURNING id`).length
      }))

    const events = (below: string) =>
      sql.withTransaction(Effect.gen(function*() {
        // Any delivery counts, a young one too: a replay makes new deliveries of events up to the
        // retention period old (Replays/Repo.ts queueChunk). One seek of deliveries_event each.
        // Events a replay's chunk holds (PostgreSQL) are passed over: it may be about to name them.
        const unreferenced = (yield* sql<{ readonly id: string }>`SELECT e.id FROM events e WHERE e.id < ${below}
          AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)
          ORDER BY e.id LIMIT ${BATCH} ${skipLocked(sql)}`).map((row) => row.id)
        if (unreferenced.length === 0) return 0
        yield* sql`DELETE FROM event_changes WHERE ${sql.in("event_id", unreferenced)}`
        return (yield* sql<{ readonly id: string }>`DELETE FROM events WHERE ${
          sql.in("id", unreferenced)
        } RETURNING id`).length
      }))

    const unrouted = (below: string) =>
      sql<{ readonly id: string }>`DELETE FROM unrouted_events
        WHERE id IN (SELECT id FROM unrouted_events WHERE id < ${below} ORDER BY id LIMIT ${BATCH}) RETURNING id`.pipe(
        Effect.map((rows) => rows.length)
      )

    // The oldest first, through message_status_backlog_at (migration 0036): the table may hold a
    // month of every status of messages sent elsewhere.
    const earlyStatuses = (before: string) =>
      sql<{ readonly n: number }>`DELETE FROM message_status_backlog
        WHERE (instance_id, wa_message_id, status) IN (SELECT instance_id, wa_message_id, status
          FROM message_status_backlog WHERE status_at < ${before} ORDER BY status_at LIMIT ${BATCH})
        RETURNING 1 AS n`.pipe(Effect.map((rows) => rows.length))

    const deliveryCounts = (beforeHour: string) =>
      sql<{ readonly webhook_id: string }>`DELETE FROM webhook_delivery_hours
        WHERE hour < ${beforeHour} AND NOT (outcome = 'succeeded' AND hour = (
          SELECT MAX(latest.hour) FROM webhook_delivery_hours latest
           WHERE latest.webhook_id = webhook_delivery_hours.webhook_id AND latest.outcome = 'succeeded'))
        RETURNING webhook_id`.pipe(Effect.map((rows) => rows.length))

    const testKeys = (before: string) =>
      sql<{ readonly n: number }>`DELETE FROM webhook_tests WHERE created_at < ${before} RETURNING 1 AS n`.pipe(
        Effect.map((rows) => rows.length)
      )

    const replays = (before: string) =>
      Effect.all([
        sql<{ readonly n: number }>`DELETE FROM webhook_replays WHERE created_at < ${before} RETURNING 1 AS n`,
        sql<{ readonly n: number }>`DELETE FROM webhook_replay_keys WHERE created_at < ${before} RETURNING 1 AS n`
      ]).pipe(Effect.map(([records, keys]) => records.length + keys.length))

    const service: RetentionShape = {
      prune: (cutoffMillis) =>
        Effect.all({
          deliveries: step("deliveries", inBatches(deliveries(idFloor("dlv", cutoffMillis)))),
          events: step("events", inBatches(events(idFloor("evt", cutoffMillis)))),
          unrouted: step("unrouted", inBatches(unrouted(idFloor("unr", cutoffMillis)))),
          earlyStatuses: step("earlyStatuses", inBatches(earlyStatuses(new Date(cutoffMillis).toISOString()))),
          deliveryCounts: step("deliveryCounts", deliveryCounts(new Date(cutoffMillis).toISOString().slice(0, 13))),
          testKeys: step("testKeys", testKeys(new Date(cutoffMillis).toISOString())),
          replays: step("replays", replays(new Date(cutoffMillis).toISOString())),
          depthSamples: step("depthSamples", pruneDepthSamples(sql, minuteOf(new Date(cutoffMillis).toISOString())))
        })
    }
    return service
  })
}) {}

/** Prunes once an hour for the whole fleet (Sql/FleetJobs.ts), the first look a minute after start, for as long as the server runs. */
export const RetentionScheduleLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    const retention = yield* Retention
    const pruneOnce = Effect.gen(function*() {
      const counts = yield* retention.prune(Date.now() - Duration.toMillis(config.retention))
      if (
        counts.deliveries + counts.events + counts.unrouted + counts.earlyStatuses + counts.deliveryCounts +
            counts.testKeys + counts.replays + counts.depthSamples > 0
      ) {
        yield* Effect.logInfo("Retention pruned old records", counts)
      }
    })
    yield* runForFleet("retention", { every: Duration.hours(1), firstAfter: Duration.minutes(1) }, pruneOnce)
    // PostgreSQL's message counts are added rows (migration 0010): folded each minute, so a list's total sums a few.
    const sql = yield* SqlClient.SqlClient
    if (isPostgres(sql)) {
      yield* runForFleet(
        "message-counts",
        { every: Duration.minutes(1), firstAfter: Duration.minutes(1) },
        compactMessageCounts(sql)
      )
    }
  })
)

/**
 * The endpoints' SQL about a webhook's deliveries: its delivery log (DeliveryLog.ts), one delivery
 * with its attempts, a replay of one delivery, the recovery of a window of failed ones, and the
 * webhooks' health (the hourly counts the dispatcher's rounds keep, and the queue). The engine that
 * writes, leases and attempts deliveries is src/Delivery/.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { DeliveryStatus } from "../Domain/Vocabulary.js"
import { announce, channels } from "../Sql/Notify.js"
import { decodeRows, SqlCount } from "../Sql/RowSchemas.js"
import { powerOfTwoChunks } from "../Sql/StatementShapes.js"
import {
  type AttemptRow,
  attemptRows,
  deliveryColumns,
  type DeliveryRow,
  deliveryRows,
  type LogFilter,
  type LogPage,
  logPage
} from "./DeliveryLog.js"

/** Most queued rows of each status the health of a webhook counts. */
export const QUEUED_CAP = 1_000

type ReplayOutcome = "requeued" | "not_found" | "already_queued"

/** What a recover did: how many deliveries it queued again, and whether more wait in the window. */
interface RecoverOutcome {
  readonly requeued: number
  readonly more: boolean
}

/** A webhook's deliveries by outcome over a time span, and when it last succeeded. */
export interface DeliveryHealth {
  readonly succeeded: number
  readonly failed: number
  readonly dead: number
  readonly lastSuccessAt: string | null
  /** Rows queued now, each counted up to a cap. */
  readonly pending: number
  readonly retrying: number
  /** Held behind an earlier delivery about the same person (per-person order). */
  readonly held: number
  readonly queuedCapped: boolean
}

/**
 * Queues rows again (replay, recover): pending, so due from their creation (the list of pending
 * rows relies on it). A retry waiting for its time goes on with its schedule; a finished
 * delivery gets one more attempt, with the same webhook-id, outside its person's lane (its place
 * there is long taken: it is sent again at once, held by nothing and holding nothing).
 */
const requeue = (sql: SqlClient.SqlClient, where: Statement.Fragment, now: string) =>
  sql<{ readonly id: string }>`UPDATE deliveries SET status = 'pending', next_attempt_at = created_at,
      final_attempt = CASE WHEN status = 'failed' THEN final_attempt ELSE attempts + 1 END,
      contact_key = CASE WHEN status = 'failed' THEN contact_key ELSE NULL END,
      lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
    WHERE ${where} RETURNING id`.pipe(
    // Queued again: on PostgreSQL every replica's dispatcher is told.
    Effect.tap((rows) => (rows.length === 0 ? Effect.void : announce(sql, channels.outbox, "replayed")))
  )

/** The health statement's row: its sums and counts are bigints (text) on PostgreSQL. */
const healthRows = decodeRows(Schema.Struct({
  succeeded: SqlCount,
  failed: SqlCount,
  dead: SqlCount,
  last_success_at: Schema.NullOr(Schema.String),
  pending: SqlCount,
  retrying: SqlCount,
  held: SqlCount
}))

/**
 * Each webhook's deliveries by outcome in the hourly buckets from `sinceHour` on (counted by the
 * dispatcher's rounds), its last success, and its queued rows (each status, and those held behind
 * their person's lane through deliveries_lane, counted up to QUEUED_CAP).
 */
const healthOf = (
  sql: SqlClient.SqlClient,
  webhookIds: ReadonlyArray<string>,
  sinceHour: string
): Effect.Effect<ReadonlyMap<string, DeliveryHealth>> =>
  Effect.gen(function*() {
    const health = new Map<string, DeliveryHealth>()
    for (const webhookId of webhookIds) {
      const outcome = (name: string) =>
        sql`(SELECT COALESCE(SUM(deliveries), 0) FROM webhook_delivery_hours
          WHERE webhook_id = ${webhookId} AND outcome = ${name} AND hour >= ${sinceHour})`
      const queued = (status: string) =>
        sql`(SELECT COUNT(*) FROM (SELECT 1 AS one FROM deliveries
          WHERE webhook_id = ${webhookId} AND status = ${status} AND next_attempt_at IS NOT NULL LIMIT ${
          QUEUED_CAP + 1
        }) AS queued)`
      const [row] = yield* healthRows(
        sql`SELECT ${outcome("succeeded")} AS succeeded, ${outcome("failed")} AS failed, ${outcome("dead")} AS dead,
          (SELECT last_at FROM webhook_delivery_hours WHERE webhook_id = ${webhookId} AND outcome = 'succeeded'
            ORDER BY hour DESC LIMIT 1) AS last_success_at,
          ${queued("pending")} AS pending, ${queued("failed")} AS retrying,
          (SELECT COUNT(*) FROM (SELECT 1 AS one FROM deliveries
            WHERE webhook_id = ${webhookId} AND contact_key IS NOT NULL AND status IN ('pending', 'failed')
              AND status = 'pending' AND next_attempt_at IS NULL LIMIT ${QUEUED_CAP + 1}) AS held) AS held`
      )
      const pending = row?.pending ?? 0
      const retrying = row?.retrying ?? 0
      const held = row?.held ?? 0
      health.set(webhookId, {
        succeeded: row?.succeeded ?? 0,
        failed: row?.failed ?? 0,
        dead: row?.dead ?? 0,
        lastSuccessAt: row?.last_success_at ?? null,
        pending: Math.min(pending, QUEUED_CAP),
        retrying: Math.min(retrying, QUEUED_CAP),
        held: Math.min(held, QUEUED_CAP),
        queuedCapped: pending > QUEUED_CAP || retrying > QUEUED_CAP || held > QUEUED_CAP
      })
    }
    return health
  }).pipe(Effect.orDie)

export class WebhookDeliveries extends Effect.Service<WebhookDeliveries>()("WebhookDeliveries", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /** A page of the delivery log of some webhooks, newest first (see DeliveryLog.ts). */
    const list = (filter: LogFilter): Effect.Effect<LogPage> => logPage(sql, filter)

    const find = (webhookId: string, id: string): Effect.Effect<DeliveryRow | undefined> =>
      deliveryRows(
        sql`SELECT ${sql.literal(deliveryColumns)} FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`
      ).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const findAttempts = (id: string): Effect.Effect<ReadonlyArray<AttemptRow>> =>
      attemptRows(sql`SELECT delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
        FROM delivery_attempts WHERE delivery_id = ${id} ORDER BY attempt, started_at`).pipe(Effect.orDie)

    /**
     * Sends a delivery again: a finished one gets one more attempt with the same webhook-id; a retry
     * waiting is due now. Either way it is pending again, due from its creation.
     */
    const replay = (webhookId: string, id: string, now: string): Effect.Effect<ReplayOutcome> =>
      Effect.gen(function*() {
        const rows = yield* sql<{ readonly status: DeliveryStatus; readonly lease_expires_at: string | null }>`
          SELECT status, lease_expires_at FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`
        const row = rows[0]
        if (row === undefined) return "not_found"
        const leased = row.lease_expires_at !== null && row.lease_expires_at >= now
        if (row.status === "pending" || (row.status === "failed" && leased)) return "already_queued"
        yield* requeue(sql, sql`id = ${id}`, now)
        return "requeued"
      }).pipe(sql.withTransaction, Effect.orDie)

    /**
     * Queues again the webhook's failed and dead deliveries created in [since, until), oldest first,
     * at most `max` (as `replay` does each; failed ones in flight are left alone). A repeat finds
     * only what failed again meanwhile. Written in small transactions, so the hub's one connection
     * is never held long.
     */
    const recover = (
      webhookId: string,
      window: { readonly since: string; readonly until: string },
      now: string,
      max: number
    ): Effect.Effect<RecoverOutcome> =>
      Effect.gen(function*() {
        const inWindow = sql`created_at BETWEEN ${window.since} AND ${window.until} AND created_at < ${window.until}`
        // Oldest first, merged from the two statuses' ranges of deliveries_webhook_failures.
        const candidates = yield* sql<{ readonly id: string; readonly created_at: string }>`
          SELECT id, created_at FROM deliveries
           WHERE webhook_id = ${webhookId} AND status = 'dead' AND status IN ('failed', 'dead', 'cancelled') AND ${inWindow}
          UNION ALL
          SELECT id, created_at FROM deliveries
           WHERE webhook_id = ${webhookId} AND status = 'failed' AND status IN ('failed', 'dead', 'cancelled') AND ${inWindow}
             AND (lease_expires_at IS NULL OR lease_expires_at < ${now})
          ORDER BY created_at, id LIMIT ${max + 1}`
        let requeued = 0
        for (const chunk of powerOfTwoChunks(candidates.slice(0, max).map((c) => c.id))) {
          const updated = yield* requeue(
            sql,
            sql`${sql.in("id", chunk)} AND webhook_id = ${webhookId}
              AND (status = 'dead' OR (status = 'failed' AND (lease_expires_at IS NULL OR lease_expires_at < ${now})))`,
            now
          ).pipe(sql.withTransaction)
          requeued += updated.length
        }
        return { requeued, more: candidates.length > max }
      }).pipe(Effect.orDie)

    const health = (webhookIds: ReadonlyArray<string>, sinceHour: string) => healthOf(sql, webhookIds, sinceHour)

    return { list, find, findAttempts, replay, recover, health } as const
  })
}) {}

/**
 * The outbox by state, as a metrics scrape reads it: ONE statement of bounded reads, however many
 * rows the outbox holds (millions: finished deliveries stay for the retention period).
 *
 * - Queued rows (pending or failed) not leased are read through deliveries_due, which holds only
 *   them, and those whose lease expired through deliveries_leased (the rows in flight); each count
 *   stops at OUTBOX_COUNT_CAP rows, so a backlog of millions costs what 10,000 do.
 * - Dead rows are not in that index. They are counted per webhook through deliveries_webhook_failures
 *   (the partial index of failed, dead and cancelled rows, led by webhook_id): one seek per webhook,
 *   the whole count stopping at the cap, never a walk over the finished rows.
 * - The oldest due row is the first of each status's free range, or an expired lease's row.
 *
 * Rows leased and in flight are not counted here: the dispatcher knows its own (Dispatcher.ts).
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { OUTBOX_COUNT_CAP } from "../Metrics/Metrics.js"
import { decodeRows, SqlCount } from "../Sql/RowSchemas.js"
import { expiredLease, freeDue } from "./Lease.js"

export interface OutboxStateCounts {
  /** Due now and not leased (pending and failed rows, each counted up to the cap). */
  readonly due: number
  /** Failed, their next attempt not yet due. */
  readonly failed: number
  readonly dead: number
  /** When the oldest due row not leased became due (ISO 8601), if any is. */
  readonly oldestDueAt: string | null
}

/** The statement's one row: its counts are bigints (text) on PostgreSQL. */
const stateRows = decodeRows(Schema.Struct({
  due_pending: SqlCount,
  due_failed: SqlCount,
  failed: SqlCount,
  dead: SqlCount,
  oldest_pending: Schema.NullOr(Schema.String),
  oldest_failed: Schema.NullOr(Schema.String)
}))

/** The statement (a test checks its plan) and its reading at `now`. */
export const outboxStateQueries = (sql: SqlClient.SqlClient) => {
  const capped = (rows: Statement.Fragment) =>
    sql`(SELECT COUNT(*) FROM (${rows} LIMIT ${OUTBOX_COUNT_CAP}) AS counted)`
  const due = (status: "pending" | "failed", now: string) =>
    sql`(${capped(sql`SELECT 1 AS one FROM deliveries WHERE ${freeDue(sql, status, now)}`)} + ${
      capped(sql`SELECT 1 AS one FROM deliveries WHERE ${expiredLease(sql, now)}
        AND status = ${status} AND next_attempt_at <= ${now}`)
    })`
  const oldest = (status: "pending" | "failed", now: string) =>
    sql`(SELECT MIN(at) FROM (
      SELECT * FROM (SELECT next_attempt_at AS at FROM deliveries WHERE ${freeDue(sql, status, now)}
        ORDER BY next_attempt_at LIMIT 1) AS first_free
      UNION ALL
      SELECT next_attempt_at AS at FROM deliveries WHERE ${expiredLease(sql, now)}
        AND status = ${status} AND next_attempt_at <= ${now}) AS firsts)`

  const statement = (now: string) =>
    sql`SELECT ${due("pending", now)} AS due_pending, ${due("failed", now)} AS due_failed,
        ${
      capped(
        // A retry not yet due is never leased.
        sql`SELECT 1 AS one FROM deliveries WHERE status = 'failed' AND next_attempt_at IS NOT NULL AND next_attempt_at > ${now}
          AND lease_owner IS NULL`
      )
    } AS failed,
        ${
      // CROSS JOIN: SQLite keeps the webhooks as the outer loop (a seek each), whatever its statistics say.
      capped(sql`SELECT 1 AS one FROM webhooks w CROSS JOIN deliveries d
          WHERE d.webhook_id = w.id AND d.status = 'dead' AND d.status IN ('failed', 'dead', 'cancelled')`)} AS dead,
        ${oldest("pending", now)} AS oldest_pending, ${oldest("failed", now)} AS oldest_failed`

  const read = (now: string): Effect.Effect<OutboxStateCounts> =>
    Effect.map(stateRows(statement(now)), ([row]) => {
      const oldest = [row?.oldest_pending ?? null, row?.oldest_failed ?? null].filter((at): at is string =>
        at !== null
      ).sort()[0]
      return {
        due: Math.min(OUTBOX_COUNT_CAP, (row?.due_pending ?? 0) + (row?.due_failed ?? 0)),
        failed: row?.failed ?? 0,
        dead: row?.dead ?? 0,
        oldestDueAt: oldest ?? null
      }
    }).pipe(Effect.orDie)

  return { statement, read }
}

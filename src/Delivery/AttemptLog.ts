/**
 * The attempt log: a round's finished attempts written in a few multi-row statements, their
 * deliveries moved on (succeeded, failed with a retry due, or dead), the webhooks' failure streaks
 * and the hourly counts of their health.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Effect } from "effect"
import { newId } from "../Domain/Ids.js"
import { isPostgres } from "../Sql/Dialect.js"
import { insertRows, jsonRowsInsert, rowStatement } from "../Sql/RowStatement.js"
import { padded } from "../Sql/StatementShapes.js"
import type { Lane } from "./Lanes.js"
import type { AttemptRecord } from "./Records.js"

/** What logging a round's attempts did: since when each webhook with a failed attempt has failed, and how many held deliveries became due. */
export interface RecordedAttempts {
  readonly failing: ReadonlyMap<string, string>
  readonly released: number
}

const nothingRecorded: RecordedAttempts = { failing: new Map(), released: 0 }

/** The lanes of deliveries that ended (succeeded or dead): their next delivery may go (Lanes.ts). */
const endedLanes = (records: ReadonlyArray<AttemptRecord>): ReadonlyArray<Lane> =>
  records.flatMap((r) =>
    r.result._tag === "RetryAt" || r.delivery.contact_key === null
      ? []
      : [{ webhookId: r.delivery.webhook_id, person: r.delivery.contact_key }]
  )

/** The hour bucket of a time: `2026-11-23T20`. */
export const hourOf = (iso: string) => iso.slice(0, 13)

/**
 * The webhooks' health a round adds: one count per webhook, outcome and hour, whatever the number
 * of attempts, with the last attempt's time.
 */
const hourlyCounts = (records: ReadonlyArray<AttemptRecord>) => {
  const counts = new Map<
    string,
    { webhook_id: string; outcome: string; hour: string; deliveries: number; last_at: string }
  >()
  for (const record of records) {
    const outcome = record.result._tag === "Succeeded"
      ? "succeeded"
      : record.result._tag === "RetryAt"
      ? "failed"
      : "dead"
    const key = `${record.delivery.webhook_id} ${outcome} ${hourOf(record.finishedAt)}`
    const count = counts.get(key)
    if (count === undefined) {
      counts.set(key, {
        webhook_id: record.delivery.webhook_id,
        outcome,
        hour: hourOf(record.finishedAt),
        deliveries: 1,
        last_at: record.finishedAt
      })
    } else {
      count.deliveries++
      if (record.finishedAt > count.last_at) count.last_at = record.finishedAt
    }
  }
  // In one order of keys: two replicas' rounds counting into the same rows lock them in the same order
  // (one statement each on PostgreSQL), so they cannot deadlock on them.
  return [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, count]) => count)
}

/** The attempt log's statements; on PostgreSQL one statement for all rows where SQLite takes one per row. */
const ATTEMPT_COLUMNS = [
  "id",
  "delivery_id",
  "attempt",
  "started_at",
  "status_code",
  "latency_ms",
  "error",
  "response_snippet"
] as const

const attemptStatements = (sql: SqlClient.SqlClient) => {
  const insertAttempt = insertRows(sql, "delivery_attempts", ATTEMPT_COLUMNS)
  // A success stands even if the webhook was disabled meanwhile: the receiver has the event.
  const markSucceededEach = rowStatement(
    sql,
    ["id", "owner", "attempts", "status_code", "at"],
    (p) =>
      sql`UPDATE deliveries SET status = 'succeeded', attempts = ${p("attempts")}, last_status_code = ${
        p("status_code")
      },
        last_error = NULL, next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ${p("at")}
      WHERE id = ${p("id")} AND lease_owner = ${p("owner")}`
  )
  const markFailedEach = rowStatement(
    sql,
    ["id", "owner", "status", "next_attempt_at", "attempts", "status_code", "error", "at"],
    (p) =>
      sql`UPDATE deliveries SET status = ${p("status")}, next_attempt_at = ${p("next_attempt_at")}, attempts = ${
        p("attempts")
      },
        last_status_code = ${p("status_code")}, last_error = ${p("error")}, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = ${p("at")}
      WHERE id = ${p("id")} AND lease_owner = ${p("owner")} AND status IN ('pending', 'failed')`
  )
  // On PostgreSQL the same, every row in one statement (each statement is a round trip there).
  const markSucceededAll = (rows: ReadonlyArray<SucceededRow>) =>
    sql`UPDATE deliveries AS d SET status = 'succeeded', attempts = r.attempts,
        last_status_code = r.status_code, last_error = NULL, next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = r.at
      FROM json_to_recordset(${
      JSON.stringify(rows)
    }::json) AS r(id text, owner text, attempts integer, status_code integer, at text)
      WHERE d.id = r.id AND d.lease_owner = r.owner`
  const markFailedAll = (
    rows: ReadonlyArray<
      {
        readonly id: string
        readonly owner: string
        readonly status: string
        readonly next_attempt_at: string | null
        readonly attempts: number
        readonly status_code: number | null
        readonly error: string | null
        readonly at: string
      }
    >
  ) =>
    rows.length === 0 ?
      Effect.void :
      Effect.asVoid(sql`UPDATE deliveries AS d SET status = r.status, next_attempt_at = r.next_attempt_at,
        attempts = r.attempts, last_status_code = r.status_code, last_error = r.error, lease_owner = NULL, lease_expires_at = NULL,
        updated_at = r.at
      FROM json_to_recordset(${JSON.stringify(rows)}::json)
        AS r(id text, owner text, status text, next_attempt_at text, attempts integer, status_code integer, error text, at text)
      WHERE d.id = r.id AND d.lease_owner = r.owner AND d.status IN ('pending', 'failed')`)
  const postgres = isPostgres(sql)
  const markFailed = postgres ? markFailedAll : markFailedEach
  /**
   * The attempts logged and the successes marked: on PostgreSQL one statement, the attempts' insert a
   * CTE of the update (both touch only the round's own leased rows; the attempts' foreign keys are
   * checked at the statement's end, on the rows as updated), one round trip fewer per round.
   */
  const logAndMarkSucceeded = (
    attempts: ReadonlyArray<{ readonly [K in (typeof ATTEMPT_COLUMNS)[number]]: string | number | null }>,
    succeeded: ReadonlyArray<SucceededRow>
  ): Effect.Effect<void, SqlError.SqlError> => {
    if (!postgres) return Effect.zipRight(insertAttempt(attempts), Effect.asVoid(markSucceededEach(succeeded)))
    if (succeeded.length === 0) return Effect.asVoid(insertAttempt(attempts))
    return Effect.asVoid(
      sql`WITH a AS (${jsonRowsInsert(sql, "delivery_attempts", ATTEMPT_COLUMNS, attempts)}) ${
        markSucceededAll(succeeded)
      }`
    )
  }
  // One row per webhook, outcome and hour; a round adds its counts to it. On PostgreSQL one statement
  // for the round's rows (each key once: hourlyCounts), not one per webhook and outcome (issue 34).
  const countDeliveries = insertRows(
    sql,
    "webhook_delivery_hours",
    ["webhook_id", "outcome", "hour", "deliveries", "last_at"],
    `ON CONFLICT (webhook_id, outcome, hour) DO UPDATE SET
        deliveries = webhook_delivery_hours.deliveries + excluded.deliveries,
        last_at = CASE WHEN excluded.last_at > webhook_delivery_hours.last_at THEN excluded.last_at ELSE webhook_delivery_hours.last_at END`
  )

  return { logAndMarkSucceeded, markFailed, countDeliveries }
}

/** A success to mark on its delivery (leased to `owner`). */
interface SucceededRow {
  readonly id: string
  readonly owner: string
  readonly attempts: number
  readonly status_code: number | null
  readonly at: string
}

/**
 * Logs attempts and moves their deliveries on, then makes the next delivery of each person's lane
 * that ended due (`advance`, Lanes.ts), all in the caller's transaction; returns, for each webhook
 * with a failed attempt, since when it has been failing, and how many deliveries became due.
 */
export const makeRecordAttempts = (
  sql: SqlClient.SqlClient,
  advance: (lanes: ReadonlyArray<Lane>, at: string) => Effect.Effect<number, SqlError.SqlError>
) => {
  const { countDeliveries, logAndMarkSucceeded, markFailed } = attemptStatements(sql)
  return (owner: string, records: ReadonlyArray<AttemptRecord>): Effect.Effect<RecordedAttempts> =>
    Effect.gen(function*() {
      if (records.length === 0) return nothingRecorded
      const succeeded = records.filter((r) => r.result._tag === "Succeeded")
      yield* logAndMarkSucceeded(
        records.map((record) => ({
          id: newId("att"),
          delivery_id: record.delivery.id,
          attempt: record.attempt,
          started_at: record.startedAt,
          status_code: record.statusCode,
          latency_ms: record.latencyMs,
          error: record.error,
          response_snippet: record.responseSnippet
        })),
        succeeded.map((r) => ({
          id: r.delivery.id,
          owner,
          attempts: r.attempt,
          status_code: r.statusCode,
          at: r.finishedAt
        }))
      )
      // Only webhooks seen failing when their rows were leased: most rounds need no statement here.
      const recovered = [
        ...new Set(succeeded.flatMap((r) => (r.delivery.webhook_failing_since === null ? [] : [r.delivery.webhook_id])))
      ]
      if (recovered.length > 0) {
        yield* sql`UPDATE webhooks SET failing_since = NULL WHERE ${
          sql.in("id", padded(recovered))
        } AND failing_since IS NOT NULL`
      }

      const failed = records.filter((r) => r.result._tag !== "Succeeded")
      yield* markFailed(failed.map((r) => ({
        id: r.delivery.id,
        owner,
        status: r.result._tag === "RetryAt" ? "failed" : "dead",
        next_attempt_at: r.result._tag === "RetryAt" ? r.result.at : null,
        attempts: r.attempt,
        status_code: r.statusCode,
        error: r.error,
        at: r.finishedAt
      })))
      yield* countDeliveries(hourlyCounts(records))
      const released = yield* advance(endedLanes(records), new Date().toISOString())

      const failing = new Map<string, string>()
      for (const record of failed) {
        if (failing.has(record.delivery.webhook_id)) continue
        const rows = yield* sql<{ readonly failing_since: string }>`UPDATE webhooks
          SET failing_since = COALESCE(failing_since, ${record.finishedAt}) WHERE id = ${record.delivery.webhook_id}
          RETURNING failing_since`
        const since = rows[0]?.failing_since
        if (since !== undefined) failing.set(record.delivery.webhook_id, since)
      }
      return { failing, released }
    }).pipe(Effect.orDie)
}

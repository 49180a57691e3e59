/**
 * Statuses that arrive for an upstream id no record holds yet, kept in `message_status_backlog` until a
 * record takes that id: the send's acceptance being written (the usual race), or a queued send that
 * ended `outcome_unknown` and whose Graph call did reach Meta after all (`claimUnknownOutcomes`).
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { nowIso } from "../Domain/Ids.js"
import { messageStatuses } from "../Domain/Vocabulary.js"
import { isPostgres } from "../Sql/Dialect.js"
import { insertMany, jsonRowsInsert } from "../Sql/RowStatement.js"
import { type EarlyStatus, statusRank } from "./ChangePlan.js"

/** Each step's time column, and the time an early status of the record's upstream id gives it. */
export const STEP_COLUMNS = [
  { status: "sent", name: "sent_at", field: "sentAt" },
  { status: "delivered", name: "delivered_at", field: "deliveredAt" },
  { status: "read", name: "read_at", field: "readAt" },
  { status: "failed", name: "failed_at", field: "failedAt" }
] as const

const earlyStepAt = (status: string) =>
  `(SELECT x.status_at FROM message_status_backlog x WHERE x.instance_id = messages.instance_id AND x.wa_message_id = messages.wa_message_id AND x.status = '${status}')`

/** A record's status as its rank (statusRank), in SQL. */
const RANK_WHENS = messageStatuses.map((status) => `WHEN '${status}' THEN ${statusRank[status]}`).join(" ")
const rankSql = (column: string) => `(CASE ${column} ${RANK_WHENS} END)`

/**
 * Applies the highest-ranked early event of a record that just took its upstream id, forward only: an
 * event that arrived between taking the id and this statement has already moved the record itself.
 */
export const applyEarly = (sql: SqlClient.SqlClient, id: string, waMessageId: string) =>
  sql`UPDATE messages SET status = b.status, status_at = b.status_at, error = COALESCE(b.error, messages.error), updated_at = ${nowIso()},
        ${
    sql.literal(
      STEP_COLUMNS.map((column) => `${column.name} = COALESCE(messages.${column.name}, ${earlyStepAt(column.status)})`)
        .join(", ")
    )
  }
      FROM (SELECT status, status_rank, status_at, error FROM message_status_backlog
            WHERE instance_id = (SELECT instance_id FROM messages WHERE id = ${id}) AND wa_message_id = ${waMessageId}
            ORDER BY status_rank DESC LIMIT 1) AS b
      WHERE messages.id = ${id}
        AND ${sql.literal(rankSql("messages.status"))} < b.status_rank`

/** A status for an upstream id no record holds, with the person it names. */
export interface UnplacedStatus {
  readonly instanceId: string
  readonly waMessageId: string
  /** When Meta says it happened (ISO 8601). */
  readonly at: string
  /** The person's number and business-scoped user id, as the status names them. */
  readonly recipients: ReadonlyArray<string>
}

/**
 * Meta's clock and the hub's differ, and a status's time has whole seconds: a send recorded up to this
 * long after its status's time may still be the one the status is of.
 */
const CLOCK_SLACK_MS = 60_000

/**
 * Keeps a group's early statuses in the backlog (the first per id and status: the key says so), and
 * gives each unplaced id its record if it is of a queued send that ended `outcome_unknown` (its Graph
 * call may have reached Meta unanswered; it is never made again: SendQueue/Rules.ts). Meta's status
 * for it names an upstream id the hub never learnt: the oldest such record of the same instance and
 * person takes that id, is no longer failed, and moves to the status's step (applyEarly, from the
 * backlog the status was just kept in). Most groups' unplaced statuses are of sends made outside the
 * hub, and most instances have no unknown outcome: one look per group for the instances that have any
 * (a partial index, migration 0026, holds only those), then one statement per unplaced id of those
 * instances only. On PostgreSQL the look is part of the backlog's insert, one round trip for both
 * (docs/PERFORMANCE.md, "Fewer round trips per ingress group"). The target row's own conditions are
 * checked again by the UPDATE, so two replicas placing two ids never give one record both.
 */
export const keepEarly = (sql: SqlClient.SqlClient, early: ReadonlyArray<EarlyStatus>) =>
  Effect.gen(function*() {
    if (early.length === 0) return
    const rows = early.map((e) => ({
      instance_id: e.instanceId,
      wa_message_id: e.waMessageId,
      status: e.status,
      status_rank: e.rank,
      status_at: e.at,
      error: e.error
    }))
    const candidates = unplacedOnce(early)
    if (candidates.length === 0) return yield* insertMany(sql, "message_status_backlog", rows, BACKLOG_CONFLICT)
    const instances = [...new Set(candidates.map((status) => status.instanceId))]
    const look = sql<{ readonly instance_id: string }>`SELECT DISTINCT instance_id FROM messages
        WHERE ${sql.in("instance_id", instances)} AND failure_reason = 'outcome_unknown' AND wa_message_id IS NULL`
    const found = isPostgres(sql)
      ? yield* sql<{ readonly instance_id: string }>`WITH kept AS (${
        jsonRowsInsert(sql, "message_status_backlog", Object.keys(rows[0] ?? {}), rows, BACKLOG_CONFLICT)
      }) ${look}`
      : yield* Effect.zipRight(insertMany(sql, "message_status_backlog", rows, BACKLOG_CONFLICT), look)
    const withUnknown = new Set(found.map((row) => row.instance_id))
    if (withUnknown.size === 0) return
    yield* claimEach(sql, candidates.filter((status) => withUnknown.has(status.instanceId)))
  })

/** The backlog keeps the first status per id and step. */
const BACKLOG_CONFLICT = "ON CONFLICT (instance_id, wa_message_id, status) DO NOTHING"

/** Each status given to the oldest unknown outcome of its instance and person, if there is one. */
const claimEach = (sql: SqlClient.SqlClient, candidates: ReadonlyArray<UnplacedStatus>) =>
  Effect.forEach(
    candidates,
    (status) =>
      Effect.gen(function*() {
        const latest = new Date(Date.parse(status.at) + CLOCK_SLACK_MS).toISOString()
        const claimed = yield* sql<{ readonly id: string }>`UPDATE messages
          SET wa_message_id = ${status.waMessageId}, status = 'pending', failure_reason = NULL, status_at = NULL,
            failed_at = NULL, error = NULL, updated_at = ${nowIso()}
          WHERE failure_reason = 'outcome_unknown' AND wa_message_id IS NULL AND id = (
            SELECT m.id FROM messages m
            WHERE m.instance_id = ${status.instanceId} AND m.failure_reason = 'outcome_unknown' AND m.wa_message_id IS NULL
              AND (m.to_number IN ${sql.in(status.recipients)} OR m.user_id IN ${sql.in(status.recipients)})
              AND m.created_at <= ${latest}
            ORDER BY m.created_at, m.id LIMIT 1)
          RETURNING id`
        for (const record of claimed) yield* applyEarly(sql, record.id, status.waMessageId)
      }),
    { discard: true }
  )

/** Each unplaced id once (a group may carry its sent, delivered and read), those naming a person only. */
const unplacedOnce = (unplaced: ReadonlyArray<UnplacedStatus>) => {
  const seen = new Map<string, UnplacedStatus>()
  for (const status of unplaced) {
    const key = `${status.instanceId}\u0000${status.waMessageId}`
    if (status.recipients.length > 0 && !seen.has(key)) seen.set(key, status)
  }
  return [...seen.values()]
}

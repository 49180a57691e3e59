/**
 * Per-person order (`ordering: per_contact`): each webhook's deliveries about one person form a lane
 * (`deliveries.contact_key`, numbered by `contact_seq`). Only a lane's first unfinished delivery is
 * due; the others are held (pending, `next_attempt_at` NULL: out of the due indexes, so the lease
 * never reads them and a failing person's backlog costs the others nothing). When the first ends
 * (succeeded, dead, cancelled), `advance` makes the next one due, in the transaction that ended it.
 *
 * Fleet-safe: the ingress reading a lane's tail and a round advancing it take the lane's lock first
 * (Sql/Dialect.ts lockNames: advisory locks on PostgreSQL, held to the commit; SQLite writes one
 * transaction at a time). So a replica enqueueing behind a delivery another replica is ending either
 * sees it ended (and its row is due at once) or is seen by the advance (which releases it): never
 * two due rows in a lane, never a held row with none ahead of it.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { isPostgres, lockNames } from "../Sql/Dialect.js"
import { announce, channels } from "../Sql/Notify.js"
import { rowStatement } from "../Sql/RowStatement.js"
import { padded, powerOfTwoChunks } from "../Sql/StatementShapes.js"

/** One webhook's lane of one person. */
export interface Lane {
  readonly webhookId: string
  readonly person: string
}

/** A lane's name, for its lock and as a map key (webhook ids hold no space; PostgreSQL's JSON takes no NUL). */
export const laneName = (lane: Lane) => `lane ${lane.webhookId} ${lane.person}`

/** Persons per tail statement (a power of two, padded: a few statement shapes). */
const PERSONS_PER_STATEMENT = 128

export const makeLanes = (sql: SqlClient.SqlClient) => {
  /** Makes the first unfinished delivery of each lane due, if it is held; one row at a time (SQLite). */
  const advanceEach = rowStatement(
    sql,
    ["webhook_id", "person", "at"],
    (p) =>
      sql`UPDATE deliveries SET next_attempt_at = created_at, updated_at = ${p("at")}
      WHERE id = (SELECT id FROM deliveries WHERE webhook_id = ${p("webhook_id")} AND contact_key = ${p("person")}
          AND contact_key IS NOT NULL AND status IN ('pending', 'failed') ORDER BY contact_seq LIMIT 1)
        AND next_attempt_at IS NULL
      RETURNING id`
  )
  /** The same, every lane in one statement (PostgreSQL: each statement is a round trip). */
  const advanceAll = (lanes: ReadonlyArray<Lane>, at: string) =>
    sql<{ readonly id: string }>`UPDATE deliveries AS d SET next_attempt_at = d.created_at, updated_at = ${at}
      FROM (SELECT (SELECT x.id FROM deliveries x WHERE x.webhook_id = l.w AND x.contact_key = l.k
          AND x.contact_key IS NOT NULL AND x.status IN ('pending', 'failed') ORDER BY x.contact_seq LIMIT 1) AS id
        FROM json_to_recordset(${
      JSON.stringify(lanes.map((lane) => ({ w: lane.webhookId, k: lane.person })))
    }::json) AS l(w text, k text)) AS first
      WHERE d.id = first.id AND d.next_attempt_at IS NULL
      RETURNING d.id`
  const postgres = isPostgres(sql)

  /**
   * Locks the lanes, then reads the last place taken in each that has unfinished deliveries (by
   * lane name); a lane absent is empty: its next delivery is due at once. Run it in the transaction
   * that writes the new deliveries.
   */
  const tails = (lanes: ReadonlyArray<Lane>) =>
    Effect.gen(function*() {
      const last = new Map<string, number>()
      if (lanes.length === 0) return last
      yield* lockNames(sql, lanes.map(laneName))
      const byWebhook = new Map<string, Array<string>>()
      for (const lane of lanes) byWebhook.set(lane.webhookId, [...(byWebhook.get(lane.webhookId) ?? []), lane.person])
      for (const [webhookId, persons] of byWebhook) {
        for (const chunk of powerOfTwoChunks(persons, PERSONS_PER_STATEMENT)) {
          const rows = yield* sql<{ readonly contact_key: string; readonly last_seq: number | string }>`
            SELECT contact_key, MAX(contact_seq) AS last_seq FROM deliveries
             WHERE webhook_id = ${webhookId} AND ${sql.in("contact_key", padded(chunk))}
               AND contact_key IS NOT NULL AND status IN ('pending', 'failed')
             GROUP BY contact_key`
          for (const row of rows) last.set(laneName({ webhookId, person: row.contact_key }), Number(row.last_seq))
        }
      }
      return last
    })

  /**
   * After deliveries of these lanes ended (in the same transaction): each lane's next delivery is
   * made due. Returns how many were; on PostgreSQL every replica's dispatcher is told.
   */
  const advance = (lanes: ReadonlyArray<Lane>, at: string) =>
    Effect.gen(function*() {
      const distinct = [...new Map(lanes.map((lane) => [laneName(lane), lane])).values()]
      if (distinct.length === 0) return 0
      yield* lockNames(sql, distinct.map(laneName))
      const released = postgres
        ? (yield* advanceAll(distinct, at)).length
        : (yield* advanceEach(distinct.map((lane) => ({ webhook_id: lane.webhookId, person: lane.person, at }))))
          .reduce((n, rows) => n + rows.length, 0)
      if (released > 0) yield* announce(sql, channels.outbox, "released")
      return released
    })

  return { tails, advance }
}

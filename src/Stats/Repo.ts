/**
 * The overview's SQL: per-minute counts of sends (messages), delivery attempts and sampled queue depths
 * for one organization or one instance, and the queue depth samples' own statements. Minutes are ISO
 * text cut to the minute (`2026-11-27T11:20`), as every timestamp here is ISO text.
 */
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { idFloor } from "../Domain/Ids.js"
import { attemptOutcomes, messageStatuses } from "../Domain/Vocabulary.js"
import { decodeRows, SqlBigint } from "../Sql/RowSchemas.js"

/** Whose counts: an organization's, or one of its instances'. */
export interface StatsScope {
  readonly organizationId: string
  readonly instanceId: string | undefined
}

/** An ISO time cut to its minute: the bucket it falls in. */
export const minuteOf = (iso: string) => iso.slice(0, 16)

const decodeSends = decodeRows(Schema.Struct({
  minute: Schema.String,
  status: Schema.Literal(...messageStatuses),
  n: SqlBigint
}))

const decodeAttempts = decodeRows(Schema.Struct({
  minute: Schema.String,
  outcome: Schema.Literal(...attemptOutcomes),
  n: SqlBigint
}))

const decodeDepths = decodeRows(Schema.Struct({ minute: Schema.String, n: SqlBigint }))

/** Outbound records by the minute they were accepted (created) and their status now. */
const sendsSince = (sql: SqlClient.SqlClient) => (scope: StatsScope, sinceIso: string) => {
  // An instance's records are read by its own index (instance_id, created_at, id); an organization's by (organization_id, created_at, id).
  const owner: Statement.Fragment = scope.instanceId === undefined
    ? sql`organization_id = ${scope.organizationId}`
    : sql`instance_id = ${scope.instanceId}`
  return decodeSends(sql`SELECT substr(created_at, 1, 16) AS minute, status, COUNT(*) AS n FROM messages
    WHERE ${owner} AND created_at >= ${sinceIso} AND direction = 'outbound'
    GROUP BY substr(created_at, 1, 16), status`)
}

/**
 * Delivery attempts of the scope's webhooks by the minute they began and their outcome. Attempt ids
 * are time-ordered and made when the attempt ended (after it began), so the window is a primary-key
 * range. The window's attempts are read first and their deliveries and webhooks by primary key (CROSS
 * JOIN keeps SQLite to that order: left to choose, it starts from the organization's webhooks and walks
 * every delivery they ever had); PostgreSQL plans it as an inner join. `dead` is a delivery's last
 * attempt once it was given up.
 */
const attemptsSince = (sql: SqlClient.SqlClient) => (scope: StatsScope, sinceMillis: number) => {
  const owner: Statement.Fragment = scope.instanceId === undefined
    ? sql`w.organization_id = ${scope.organizationId}`
    : sql`w.instance_id = ${scope.instanceId}`
  return decodeAttempts(sql`SELECT substr(a.started_at, 1, 16) AS minute,
      CASE WHEN a.status_code >= 200 AND a.status_code < 300 THEN 'succeeded'
        WHEN d.status = 'dead' AND a.attempt = d.attempts THEN 'dead'
        ELSE 'failed' END AS outcome,
      COUNT(*) AS n
    FROM delivery_attempts a CROSS JOIN deliveries d CROSS JOIN webhooks w
    WHERE d.id = a.delivery_id AND w.id = d.webhook_id AND a.id >= ${idFloor("att", sinceMillis)} AND a.started_at >= ${
    new Date(sinceMillis).toISOString()
  }
      AND ${owner}
    GROUP BY 1, 2`)
}

/** The sampled queue depth of the scope's numbers, summed per minute (minutes with no row: empty queues). */
const depthsSince = (sql: SqlClient.SqlClient) => (scope: StatsScope, sinceMinute: string) => {
  const owner: Statement.Fragment = scope.instanceId === undefined
    ? sql`i.organization_id = ${scope.organizationId}`
    : sql`i.id = ${scope.instanceId}`
  return decodeDepths(sql`SELECT s.minute AS minute, SUM(s.depth) AS n FROM queue_depth_samples s
    JOIN instances i ON i.phone_number_id = s.phone_number_id
    WHERE s.minute >= ${sinceMinute} AND ${owner}
    GROUP BY s.minute`)
}

/**
 * Each number's depth at `minute`: one row per minute and number, so replicas sampling the same
 * minute leave one row (the latest reading), never a sum.
 */
const writeDepths = (sql: SqlClient.SqlClient) =>
(
  minute: string,
  depths: ReadonlyArray<{ readonly phoneNumberId: string; readonly depth: number }>
): Effect.Effect<void, SqlError.SqlError> =>
  depths.length === 0 ?
    Effect.void :
    Effect.asVoid(
      sql`INSERT INTO queue_depth_samples ${
        sql.insert(depths.map((d) => ({ minute, phone_number_id: d.phoneNumberId, depth: d.depth })))
      } ON CONFLICT (minute, phone_number_id) DO UPDATE SET depth = excluded.depth`
    )

/** Deletes the samples of minutes before `beforeMinute` (retention); answers how many. */
export const pruneDepthSamples = (sql: SqlClient.SqlClient, beforeMinute: string) =>
  sql<{ readonly n: number }>`DELETE FROM queue_depth_samples WHERE minute < ${beforeMinute} RETURNING 1 AS n`.pipe(
    Effect.map((rows) => rows.length)
  )

export class StatsRepo extends Effect.Service<StatsRepo>()("StatsRepo", {
  effect: Effect.map(SqlClient.SqlClient, (sql) => ({
    sendsSince: sendsSince(sql),
    attemptsSince: attemptsSince(sql),
    depthsSince: depthsSince(sql),
    writeDepths: writeDepths(sql)
  }))
}) {}

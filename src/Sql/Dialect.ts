/**
 * Where SQLite's SQL and PostgreSQL's must differ, in a few named pieces, so that a query is written
 * once and ported with one call. Each piece renders, on SQLite, exactly the text the hub wrote before
 * PostgreSQL was supported (the SQLite path's statements, and so its measured costs, are unchanged).
 */
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Effect } from "effect"

/** Whether the client is PostgreSQL's (decided once, where a repository is built). */
export const isPostgres = (sql: SqlClient.SqlClient): boolean =>
  sql.onDialectOrElse({ pg: () => true, orElse: () => false })

/**
 * A JSON array (text) as rows, each element in the column `value` of `alias`: then
 * `alias.value ->> 'key'` reads a member as text on both. SQLite: `json_each(?) AS alias`;
 * PostgreSQL: `json_array_elements(?::json) AS alias(value)`.
 */
export const jsonArrayRows = (sql: SqlClient.SqlClient, json: string, alias: string): Statement.Fragment =>
  isPostgres(sql)
    ? sql`json_array_elements(${json}::json) AS ${sql.literal(alias)}(value)`
    : sql`json_each(${json}) AS ${sql.literal(alias)}`

/**
 * Appended to a SELECT that picks rows to claim: on PostgreSQL `FOR UPDATE SKIP LOCKED`, so that
 * replicas claiming at once each take other rows instead of queueing on the same ones; nothing on
 * SQLite, whose single writer already excludes that.
 */
export const skipLocked = (sql: SqlClient.SqlClient): Statement.Fragment =>
  sql.literal(isPostgres(sql) ? "FOR UPDATE SKIP LOCKED" : "")

/**
 * Ends a SELECT whose rows the transaction goes on to change from what it read: on PostgreSQL
 * ` ORDER BY <orderBy> FOR UPDATE OF <table>`, so a concurrent transaction on another replica waits,
 * then reads the rows as changed (locked in one order, so two such reads cannot deadlock each other);
 * nothing on SQLite (one writer at a time, and its transactions begin IMMEDIATE). With `"key share"`,
 * for rows the transaction's inserts go on to name: `FOR KEY SHARE`, so none can be deleted before
 * it commits, and a row whose delete was under way is waited for and then not read.
 */
export const lockRead = (
  sql: SqlClient.SqlClient,
  table: string,
  orderBy: string,
  strength: "update" | "key share" = "update"
): Statement.Fragment =>
  sql.literal(isPostgres(sql) ? ` ORDER BY ${orderBy} FOR ${strength.toUpperCase()} OF ${table}` : "")

/** Statement text written with `?` placeholders (for sql.unsafe), numbered `$1, $2, …` on PostgreSQL. */
export const placeholders = (sql: SqlClient.SqlClient, text: string): string => {
  if (!isPostgres(sql)) return text
  let n = 0
  return text.replace(/\?/g, () => `$${++n}`)
}

/**
 * Serializes, until the current transaction ends, with any other transaction locking one of the
 * same names: on PostgreSQL transaction-scoped advisory locks, taken in one order (so two such calls
 * never deadlock each other); nothing on SQLite, where transactions already run one at a time.
 * For checks that span rows neither transaction can see yet (see Messages/Repo.ts: early statuses).
 */
export const lockNames = (
  sql: SqlClient.SqlClient,
  names: ReadonlyArray<string>
): Effect.Effect<void, SqlError.SqlError> =>
  !isPostgres(sql) || names.length === 0 ? Effect.void : Effect.asVoid(sql`SELECT pg_advisory_xact_lock(k.h)
    FROM (SELECT DISTINCT hashtextextended(n.value, 0) AS h FROM json_array_elements_text(${
    JSON.stringify(names)
  }::json) AS n(value)) AS k
    ORDER BY k.h`)

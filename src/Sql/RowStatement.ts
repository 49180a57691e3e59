/**
 * Hot writes, one row at a time. @effect/sql builds, compiles, traces and scopes every statement it
 * runs, some 10-15 µs before SQLite sees it. Multi-row statements spread that cost but need one text
 * per row count, and SQLite takes about as long per row either way (14-16 µs a delivery row under
 * load, measured). So a hot statement is compiled by @effect/sql once, to its own dialect's text,
 * and run once per row on the connection of the transaction it is part of (the WriteBatcher's),
 * through @effect/sql's Connection: no builder, span or scope per row, and one text, prepared once.
 */
import { SqlClient, type SqlError, type Statement } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { Effect, Option } from "effect"
import { isPostgres } from "./Dialect.js"
import { powerOfTwoChunks } from "./StatementShapes.js"

/** A value a row binds to a parameter. */
export type Param = string | number | bigint | boolean | null

/** Runs the statement once per row, in order, in the current transaction (or a new one); each row's result rows. */
export type RowStatement<K extends string> = (
  rows: ReadonlyArray<{ readonly [k in K]: Param }>
) => Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError.SqlError>

/** The text a parameter is compiled from, to find where it went in the compiled statement. */
const marker = (name: string) => `\u0000row-param:${name}`

/**
 * A statement with named parameters, each row binding its values by name:
 * `rowStatement(sql, ["id", "owner"], (p) => sql\`UPDATE t SET owner = ${p("owner")} WHERE id = ${p("id")}\`)`.
 */
export const rowStatement = <const K extends string>(
  sql: SqlClient.SqlClient,
  names: ReadonlyArray<K>,
  build: (param: (name: K) => string) => Statement.Statement<unknown>
): RowStatement<K> => {
  const [text, compiled] = build(marker).compile()
  const bound = compiled.flatMap((value) => names.filter((name) => marker(name) === value))
  // Every parameter must be a named one, once per place it appears: a mistake here is the code's.
  const wrong = bound.length !== compiled.length
    ? `a parameter of ${text} is not one of ${names.join(", ")}`
    : undefined

  const runOn = (connection: Connection, rows: ReadonlyArray<{ readonly [k in K]: Param }>) =>
    Effect.forEach(rows, (row) => connection.execute(text, bound.map((name) => row[name]), undefined))

  /** On the current transaction's connection; outside one, in a transaction of its own. */
  const runInTransaction = (
    rows: ReadonlyArray<{ readonly [k in K]: Param }>,
    begun: boolean
  ): Effect.Effect<ReadonlyArray<ReadonlyArray<unknown>>, SqlError.SqlError> =>
    Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) =>
      Option.match(transaction, {
        onSome: ([connection]) => runOn(connection, rows),
        onNone: () => (begun
          ? Effect.dieMessage("a transaction began without a connection")
          : sql.withTransaction(runInTransaction(rows, true)))
      }))

  return (rows) => {
    if (wrong !== undefined) return Effect.dieMessage(wrong)
    return rows.length === 0 ? Effect.succeed([]) : runInTransaction(rows, false)
  }
}

/** `INSERT INTO table (columns) VALUES (...)`, then `tail` (an ON CONFLICT or RETURNING clause, say), one row at a time. */
export const insertRow = <const K extends string>(
  sql: SqlClient.SqlClient,
  table: string,
  columns: ReadonlyArray<K>,
  tail = ""
) =>
  rowStatement(sql, columns, (param) => {
    const record: Record<string, string> = {}
    for (const column of columns) record[column] = param(column)
    return sql`INSERT INTO ${sql(table)} ${sql.insert(record)} ${sql.literal(tail)}`
  })

/** Rows per statement on PostgreSQL: one JSON parameter carries them. */
const ROWS_PER_JSON_INSERT = 1000

/**
 * PostgreSQL: `INSERT INTO table (columns) SELECT columns FROM json_populate_recordset(…)`, then
 * `tail`: any number of rows in one statement (one round trip), typed by the table's own row type,
 * a key a row lacks read as NULL. Also a part of a larger statement (a CTE of it).
 */
export const jsonRowsInsert = (
  sql: SqlClient.SqlClient,
  table: string,
  columns: ReadonlyArray<string>,
  rows: ReadonlyArray<object>,
  tail = ""
): Statement.Statement<unknown> => {
  const list = columns.map((column) => `"${column}"`).join(", ")
  return sql`INSERT INTO ${sql(table)} (${sql.literal(list)})
    SELECT ${sql.literal(list)} FROM json_populate_recordset(NULL::${sql(table)}, ${
    JSON.stringify(rows, bigintsAsNumbers)
  }::json)
    ${sql.literal(tail)}`
}

/**
 * As insertRow, answering every row the `tail`'s RETURNING gave, in one list. On PostgreSQL, whose
 * every statement is a round trip on the network (SQLite's is a call), the rows go in one
 * statement per thousand, as one JSON parameter (jsonRowsInsert); on SQLite, one statement per
 * row, as insertRow.
 */
export const insertRows = <const K extends string>(
  sql: SqlClient.SqlClient,
  table: string,
  columns: ReadonlyArray<K>,
  tail = ""
) => {
  if (!isPostgres(sql)) {
    const each = insertRow(sql, table, columns, tail)
    return (rows: ReadonlyArray<{ readonly [k in K]: Param }>) => Effect.map(each(rows), (results) => results.flat())
  }
  return (
    rows: ReadonlyArray<{ readonly [k in K]: Param }>
  ): Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError> =>
    Effect.map(
      Effect.forEach(
        chunksOf(rows, ROWS_PER_JSON_INSERT),
        (chunk) => jsonRowsInsert(sql, table, columns, chunk, tail)
      ),
      (results) => results.flat()
    )
}

/**
 * Rows of one shape (the first row's keys, as `sql.insert` takes them) in multi-row statements, off
 * the hot path's row statements: on PostgreSQL one statement per thousand (jsonRowsInsert); on SQLite
 * `INSERT … VALUES` in chunks of powers of two (StatementShapes.ts), one text per chunk size.
 */
export const insertMany = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, Param>>,
  tail = ""
): Effect.Effect<void, SqlError.SqlError> => {
  const first = rows[0]
  if (first === undefined) return Effect.void
  if (isPostgres(sql)) {
    const columns = Object.keys(first)
    return Effect.forEach(
      chunksOf(rows, ROWS_PER_JSON_INSERT),
      (chunk) => jsonRowsInsert(sql, table, columns, chunk, tail),
      { discard: true }
    )
  }
  return Effect.forEach(
    powerOfTwoChunks(rows),
    (chunk) => sql`INSERT INTO ${sql(table)} ${sql.insert(chunk)} ${sql.literal(tail)}`,
    { discard: true }
  )
}

const chunksOf = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size))

/** JSON has no bigint: written as a number. */
const bigintsAsNumbers = (_key: string, value: unknown) => (typeof value === "bigint" ? Number(value) : value)

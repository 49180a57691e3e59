/**
 * `hub migrate-data --from <sqlite file> --to <postgres url>`: moves a SQLite hub's data to
 * PostgreSQL. Both are first brought to this version's schema (the same migrations `hub serve`
 * runs); the target must then hold no rows. Every table of the source is copied, whatever features
 * added it: tables in dependency order (each after the tables its foreign keys name), rows in
 * batches read by rowid, in ONE transaction on the target, so a failure leaves it empty and the
 * command can simply be run again. The target's triggers are off while a table is copied (what they
 * keep, such as message_counts, is copied too). Each table's row count is compared at the end.
 */
import { SqlClient } from "@effect/sql"
import { Context, Data, Effect, Layer, Redacted, type Scope } from "effect"
import { existsSync } from "node:fs"
import { databaseEngine } from "../Config.js"
import { postgresLayer, sqliteLayer } from "./Client.js"
import { countRows } from "./RowSchemas.js"

class MigrateDataError extends Data.TaggedError("MigrateDataError")<{ readonly message: string }> {}

/** Tables that are the database's own bookkeeping, not data. */
const SKIPPED = new Set(["effect_sql_migrations", "fleet_jobs"])

/** Most values bound in one INSERT (PostgreSQL takes 65,535). */
const VALUES_PER_INSERT = 30_000

/** Rows read from the source at a time. */
const READ_BATCH = 2_000

interface CopiedTable {
  readonly table: string
  readonly rows: number
}

/** The source's tables, each after those its foreign keys reference. */
const tablesInOrder = (source: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const names = (yield* source<{ readonly name: string }>`SELECT name FROM sqlite_master
      WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`).map((row) => row.name).filter((name) =>
      !SKIPPED.has(name)
    )
    const references = new Map<string, ReadonlyArray<string>>()
    for (const name of names) {
      const keys = yield* source.unsafe<{ readonly table: string }>(
        `PRAGMA foreign_key_list("${name.replaceAll("\"", "\"\"")}")`
      )
      references.set(name, keys.map((key) => key.table).filter((table) => table !== name))
    }
    const ordered: Array<string> = []
    const visit = (name: string, path: ReadonlyArray<string>) => {
      if (ordered.includes(name) || !names.includes(name)) return
      if (path.includes(name)) return // a cycle of foreign keys: keep the order found so far
      for (const referenced of references.get(name) ?? []) visit(referenced, [...path, name])
      ordered.push(name)
    }
    for (const name of names) visit(name, [])
    return ordered
  })

/** A table's columns on the target (those the source also has are copied). */
const targetColumns = (target: SqlClient.SqlClient, table: string) =>
  Effect.map(
    target<{ readonly column_name: string }>`SELECT column_name FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = ${table} ORDER BY ordinal_position`,
    (rows) => rows.map((row) => row.column_name)
  )

const countOf = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(countRows(sql`SELECT COUNT(*) AS n FROM ${sql(table)}`), (rows) => rows[0]?.n ?? 0)

/**
 * Runs a read of the source outside the target's transaction: @effect/sql finds the transaction's
 * connection in the fiber's context, whichever client the statement belongs to.
 */
const outsideTarget = <A, E>(read: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(
    read,
    (context: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(context)
  )

/** Copies one table in batches; returns how many rows were read. */
const copyTable = (source: SqlClient.SqlClient, target: SqlClient.SqlClient, table: string) =>
  Effect.gen(function*() {
    const sourceColumns = (yield* outsideTarget(
      source.unsafe<{ readonly name: string }>(`PRAGMA table_info("${table.replaceAll("\"", "\"\"")}")`)
    )).map((c) => c.name)
    const wanted = new Set(yield* targetColumns(target, table))
    if (wanted.size === 0) {
      return yield* new MigrateDataError({ message: `table ${table} of the source does not exist on the target` })
    }
    const columns = sourceColumns.filter((column) => wanted.has(column))
    const rowsPerInsert = Math.max(1, Math.floor(VALUES_PER_INSERT / Math.max(1, columns.length)))
    let after = -Infinity
    let copied = 0
    for (;;) {
      const batch = yield* outsideTarget(
        source<Record<string, unknown>>`SELECT rowid AS migrate_rowid, ${
          source.literal(columns.map((c) => `"${c}"`).join(", "))
        }
        FROM ${source(table)} WHERE rowid > ${Number.isFinite(after) ? after : -1} ORDER BY rowid LIMIT ${READ_BATCH}`
      )
      if (batch.length === 0) return copied
      after = Number(batch[batch.length - 1]?.migrate_rowid)
      for (let at = 0; at < batch.length; at += rowsPerInsert) {
        const rows = batch.slice(at, at + rowsPerInsert).map((row) =>
          Object.fromEntries(columns.map((column) => [column, row[column] ?? null]))
        )
        yield* target`INSERT INTO ${target(table)} ${target.insert(rows)}`
      }
      copied += batch.length
    }
  })

/** Copies every table of `source` (SQLite) into `target` (PostgreSQL), which must hold no rows. */
const copyAll = (source: SqlClient.SqlClient, target: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const tables = yield* tablesInOrder(source)
    for (const table of tables) {
      const rows = yield* countOf(target, table)
      if (rows > 0) {
        return yield* new MigrateDataError({
          message:
            `the target is not empty (table ${table} has ${rows} rows); migrate-data copies only into a database no hub has used`
        })
      }
    }
    // The target's own triggers (message_counts from messages) stay off while rows are copied as they
    // are: their effects are copied too. Foreign keys are not triggers of this kind: they are checked.
    const copied = yield* target.withTransaction(Effect.forEach(tables, (table) =>
      Effect.gen(function*() {
        yield* target`ALTER TABLE ${target(table)} DISABLE TRIGGER USER`
        const rows = yield* copyTable(source, target, table)
        yield* target`ALTER TABLE ${target(table)} ENABLE TRIGGER USER`
        return { table, rows } satisfies CopiedTable
      })))
    // Every table holds, on the target, what the source holds.
    for (const table of tables) {
      const [from, to] = [yield* countOf(source, table), yield* countOf(target, table)]
      if (from !== to) {
        return yield* new MigrateDataError({
          message: `table ${table}: ${from} rows in the source, ${to} on the target`
        })
      }
    }
    return copied
  })

const clientOf = <R>(
  layer: Layer.Layer<R | SqlClient.SqlClient>
): Effect.Effect<SqlClient.SqlClient, never, Scope.Scope> =>
  Effect.map(Layer.build(layer), (context) => Context.get(context, SqlClient.SqlClient))

/** The command: checks its arguments, opens (and migrates) both databases, copies. */
export const migrateData = (options: { readonly from: string; readonly to: string }) =>
  Effect.gen(function*() {
    if (!existsSync(options.from)) {
      return yield* new MigrateDataError({ message: `--from ${options.from}: no such SQLite file` })
    }
    if (databaseEngine(options.to) !== "postgres") {
      return yield* new MigrateDataError({ message: "--to must be a postgres://user:password@host:port/database URL" })
    }
    const source = yield* clientOf(sqliteLayer(options.from))
    const target = yield* clientOf(postgresLayer(Redacted.make(options.to), 2))
    const copied = yield* copyAll(source, target).pipe(
      Effect.catchTag("SqlError", (e) =>
        new MigrateDataError({ message: `copying failed, nothing was kept: ${String(e.cause ?? e.message)}` }))
    )
    return {
      tables: copied,
      rows: copied.reduce((n, t) =>
        n + t.rows, 0)
    }
  }).pipe(Effect.scoped)

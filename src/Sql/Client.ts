/**
 * The database: SQLite (via @effect/sql-sqlite-bun) with WAL, a busy timeout and foreign keys,
 * migrated at start from migrations compiled into the code, so the single binary migrates itself.
 */
import { Migrator, SqlClient } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Effect, Layer, Scope } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { HubConfig } from "../Config.js"
import { migrations } from "./migrations/index.js"

const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

const pragmas = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe("PRAGMA busy_timeout = 5000")
  yield* sql.unsafe("PRAGMA foreign_keys = ON")
  // In WAL mode NORMAL does not flush a commit to the disk: a post answered 200 or a send recorded
  // could vanish with the machine's power. FULL flushes each commit before it returns; the group
  // commit (Sql/WriteBatcher.ts) spreads one flush over every write of its batch.
  yield* sql.unsafe("PRAGMA synchronous = FULL")
})

/**
 * Bun keeps 20 prepared statements per database by default. Group writes insert many rows per
 * statement, one statement text per row count, which pushed the hot statements out of so small a
 * cache: each batch prepared its statements again (30-70 µs for a multi-row insert).
 */
const STATEMENT_CACHE_SIZE = 128

/**
 * Transactions take SQLite's write lock as they begin (BEGIN IMMEDIATE) instead of at their first
 * write. A transaction that has read cannot wait for the lock: when another connection holds it
 * (the checkpoint worker's RESTART, the CLI, a second hub on the same file), SQLite answers
 * "database is locked" at once, without the busy timeout. At 1,000 events/s that failed up to 45
 * of 8,000 upstream posts with a 500, and some dispatcher rounds. Begun immediately, a
 * transaction waits out the lock (busy_timeout) before it reads anything. The hub has one
 * connection, so locking earlier costs it nothing.
 */
const beginningImmediately = (sql: SqlClient.SqlClient) => {
  const run = (statement: string) => (conn: Connection) => Effect.asVoid(conn.executeUnprepared(statement, [], undefined))
  const withTransaction = SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [["db.system.name", "sqlite"]],
    acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(Scope.extend(sql.reserve, scope), (conn): readonly [Scope.CloseableScope, Connection] => [scope, conn])),
    begin: run("BEGIN IMMEDIATE"),
    // The savepoint names @effect/sql itself uses.
    savepoint: (conn, id) => run(`SAVEPOINT effect_sql_${id}`)(conn),
    commit: run("COMMIT"),
    rollback: run("ROLLBACK"),
    rollbackSavepoint: (conn, id) => run(`ROLLBACK TO SAVEPOINT effect_sql_${id}`)(conn)
  })
  // The client is also a function (the sql`` tag), so it is amended where it stands, before any use.
  return Object.assign(sql, { withTransaction })
}

/** A migrated SQLite database in the given file (`:memory:` for tests). */
export const sqliteLayer = (filename: string) => {
  const cacheSize = Layer.effectDiscard(Effect.sync(() => {
    Database.MAX_QUERY_CACHE_SIZE = Math.max(Database.MAX_QUERY_CACHE_SIZE, STATEMENT_CACHE_SIZE)
  }))
  const client = Layer.effectDiscard(Effect.map(SqlClient.SqlClient, beginningImmediately)).pipe(
    Layer.provideMerge(SqliteClient.layer({ filename }))
  )
  const prepare = Layer.effectDiscard(
    Effect.zipRight(pragmas, runMigrations).pipe(Effect.withSpan("Sql.migrate"))
  )
  const ensureFolder = Layer.effectDiscard(Effect.sync(() => {
    if (filename !== ":memory:") mkdirSync(dirname(filename), { recursive: true })
  }))
  return Layer.provideMerge(prepare, client).pipe(Layer.provide(Layer.merge(ensureFolder, cacheSize)), Layer.orDie)
}

/** The database named by HUB_DB. */
export const SqlLive = Layer.unwrapEffect(Effect.map(HubConfig, (config) => sqliteLayer(config.databaseFile)))

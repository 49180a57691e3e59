/**
 * The database, chosen by HUB_DB: a file path is SQLite (via @effect/sql-sqlite-bun) with WAL, a busy
 * timeout and foreign keys; a postgres:// URL is PostgreSQL (via @effect/sql-pg) with a pool of
 * HUB_DB_POOL_SIZE connections, shared by a fleet of replicas. Both are migrated at start by the same
 * migrations, compiled into the code, so the single binary migrates itself.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import type { Connection } from "@effect/sql/SqlConnection"
import { Database } from "bun:sqlite"
import { Duration, Effect, Layer, Redacted, Scope } from "effect"
import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from "node:fs"
import { dirname } from "node:path"
import { databaseEngine, HubConfig } from "../Config.js"
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
  const run = (statement: string) => (conn: Connection) =>
    Effect.asVoid(conn.executeUnprepared(statement, [], undefined))
  const withTransaction = SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [["db.system.name", "sqlite"]],
    acquireConnection: Effect.flatMap(
      Scope.make(),
      (scope) =>
        Effect.map(
          Scope.extend(sql.reserve, scope),
          (conn): readonly [Scope.CloseableScope, Connection] => [scope, conn]
        )
    ),
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

/**
 * The database holds message metadata, token hashes and encrypted secrets: it is for the hub's user
 * alone. Its folder is created 0700 and the file 0600 before SQLite opens it; SQLite gives the WAL and
 * shared-memory files it creates the database file's mode, and those left by an older version are
 * narrowed here. A folder that already exists is the operator's and is left as it is.
 */
const ownerOnlyDatabase = (filename: string) => {
  mkdirSync(dirname(filename), { recursive: true, mode: 0o700 })
  closeSync(openSync(filename, "a", 0o600))
  for (const file of [filename, `${filename}-wal`, `${filename}-shm`]) {
    if (existsSync(file)) chmodSync(file, 0o600)
  }
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
    if (filename !== ":memory:") ownerOnlyDatabase(filename)
  }))
  return Layer.provideMerge(prepare, client).pipe(Layer.provide(Layer.merge(ensureFolder, cacheSize)), Layer.orDie)
}

/** Any number, to name the advisory lock the fleet's migrations take (the hub's other locks use others). */
const MIGRATION_LOCK = 0x6875_6201

/**
 * Migrations run once for the fleet, even when replicas start together: each takes a transaction-scoped
 * advisory lock first, so the others wait and then find every migration applied. (@effect/sql's own
 * migrator locks its table, but creates that table before, outside any lock: two replicas starting on
 * an empty database would both try, and one fail.) The migrations table is created here, inside the
 * lock, with the migrator's own definition; the migrator's transaction is then a savepoint of this one.
 */
const migrateFleet = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(Effect.gen(function*() {
    yield* sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`
    yield* sql`CREATE TABLE IF NOT EXISTS effect_sql_migrations (
      migration_id integer primary key,
      created_at timestamp with time zone not null default now(),
      name text not null
    )`
    yield* runMigrations
  }))
})

/** A migrated PostgreSQL database at `url`, with at most `poolSize` connections (the listening connection is PgListenerLive's). */
export const postgresLayer = (url: Redacted.Redacted<string>, poolSize: number) => {
  const client = PgClient.layer({
    url,
    maxConnections: poolSize,
    applicationName: "messaging-hub",
    connectTimeout: Duration.seconds(10),
    idleTimeout: Duration.minutes(5)
  })
  const prepare = Layer.effectDiscard(migrateFleet.pipe(Effect.withSpan("Sql.migrate")))
  return Layer.provideMerge(prepare, client).pipe(Layer.orDie)
}

/** The database named by HUB_DB: PostgreSQL for a postgres:// URL, SQLite otherwise. */
export const SqlLive = Layer.unwrapEffect(
  Effect.map(HubConfig, (config) =>
    databaseEngine(config.databaseFile) === "postgres"
      ? postgresLayer(Redacted.make(config.databaseFile), config.databasePoolSize)
      : sqliteLayer(config.databaseFile))
)

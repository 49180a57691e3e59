/**
 * The database: SQLite (via @effect/sql-sqlite-bun) with WAL, a busy timeout and foreign keys,
 * migrated at start from migrations compiled into the code, so the single binary migrates itself.
 */
import { Migrator, SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Database } from "bun:sqlite"
import { Effect, Layer } from "effect"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { HubConfig } from "../Config.js"
import { migrations } from "./migrations/index.js"

const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

const pragmas = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.unsafe("PRAGMA busy_timeout = 5000")
  yield* sql.unsafe("PRAGMA foreign_keys = ON")
  yield* sql.unsafe("PRAGMA synchronous = NORMAL")
})

/**
 * Bun keeps 20 prepared statements per database by default. Group writes insert many rows per
 * statement, one statement text per row count, which pushed the hot statements out of so small a
 * cache: each batch prepared its statements again (30-70 µs for a multi-row insert).
 */
const STATEMENT_CACHE_SIZE = 128

/** A migrated SQLite database in the given file (`:memory:` for tests). */
export const sqliteLayer = (filename: string) => {
  const cacheSize = Layer.effectDiscard(Effect.sync(() => {
    Database.MAX_QUERY_CACHE_SIZE = Math.max(Database.MAX_QUERY_CACHE_SIZE, STATEMENT_CACHE_SIZE)
  }))
  const client = SqliteClient.layer({ filename })
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

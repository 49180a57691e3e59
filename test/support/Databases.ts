/**
 * The engines a test runs on. SQLite: an in-memory database. PostgreSQL: a database of its own on the
 * run's one server (PostgresGlobalSetup.ts), created for the hub or layer that asks and dropped when it
 * is released, so tests and files never see each other's rows.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { inject } from "vitest"
import { postgresLayer, sqliteLayer } from "../../src/Sql/Client.js"
import { PgListener, pgListenerLayer } from "../../src/Sql/Notify.js"

export type Engine = "sqlite" | "postgres"

/** Both engines, for suites that run their tests on each. */
export const engines: ReadonlyArray<Engine> = ["sqlite", "postgres"]

let created = 0

/** Runs statements on the server's `postgres` database (CREATE and DROP DATABASE cannot run in a transaction, and are not). */
const onServer = <A, E>(run: (sql: PgClient.PgClient) => Effect.Effect<A, E>) =>
  Effect.flatMap(PgClient.PgClient, run).pipe(
    Effect.provide(PgClient.layer({ url: Redacted.make(inject("postgresAdminUrl")), maxConnections: 1 })),
    Effect.orDie
  )

/** A new, empty database on the run's PostgreSQL server, dropped when the scope closes; its URL. */
export const freshPostgresDatabase = Effect.acquireRelease(
  Effect.gen(function*() {
    created++
    const name = `hub_${process.pid}_${created}_${Math.random().toString(36).slice(2, 8)}`
    yield* onServer((sql) => sql.unsafe(`CREATE DATABASE ${name}`))
    return { name, url: inject("postgresAdminUrl").replace(/\/postgres$/, `/${name}`) }
  }),
  // FORCE ends connections left open by whatever used it (a hub process killed in a test).
  ({ name }) => onServer((sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).pipe(Effect.ignore)
).pipe(Effect.map(({ url }) => url))

/** HUB_DB for a test on `engine`: `:memory:`, or a fresh PostgreSQL database's URL (dropped with the scope). */
export const testDatabaseUrl = (
  engine: Engine
) => (engine === "sqlite" ? Effect.succeed(":memory:") : freshPostgresDatabase)

/** A migrated database on `engine` as a layer (SqlClient), with its listener (PgListener), for tests below the HTTP server. */
export const testDatabase = (engine: Engine) =>
  engine === "sqlite"
    ? Layer.merge(sqliteLayer(":memory:"), PgListener.None)
    : Layer.unwrapScoped(Effect.map(freshPostgresDatabase, (url) =>
      Layer.merge(postgresLayer(Redacted.make(url), 4), pgListenerLayer(Redacted.make(url)))))

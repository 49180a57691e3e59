/**
 * WAL checkpoints on a worker thread: with a database file, the hub's own connection stops
 * checkpointing inside commits once the worker has made its first checkpoint, and starts again
 * when the worker stops. An in-memory database has no WAL and no worker.
 */
import { expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { hubConfigWith } from "../src/Config.js"
import { CheckpointerLive } from "../src/Sql/Checkpointer.js"
import { sqliteLayer } from "../src/Sql/Client.js"

const autocheckpoint = Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ readonly wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`).pipe(
  Effect.map((rows) => rows[0]?.wal_autocheckpoint)
)

/** Runs `check` with the checkpointer up, on a database in `file`; returns what it saw and the setting after. */
const withCheckpointer = (file: string) =>
  Effect.gen(function*() {
    const scope = yield* Scope.make()
    yield* Layer.buildWithScope(CheckpointerLive, scope)
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)`
    yield* sql`INSERT INTO t (v) VALUES ('a'), ('b')`
    const during = yield* autocheckpoint
    yield* Scope.close(scope, Exit.void)
    return { during, after: yield* autocheckpoint }
  }).pipe(Effect.provide(Layer.provideMerge(sqliteLayer(file), hubConfigWith({ databaseFile: file }))))

it.live("with a database file, commits stop checkpointing while the worker runs, and start again when it stops", () =>
  Effect.gen(function*() {
    const folder = mkdtempSync(join(tmpdir(), "hub-checkpoint-"))
    const seen = yield* withCheckpointer(join(folder, "hub.sqlite")).pipe(Effect.ensuring(Effect.sync(() => rmSync(folder, { recursive: true, force: true }))))
    expect(seen).toEqual({ during: 0, after: 1000 })
  }))

it.live("an in-memory database keeps SQLite's own setting and starts no worker", () =>
  Effect.gen(function*() {
    const seen = yield* withCheckpointer(":memory:")
    expect(seen.during).toBe(seen.after)
    expect(seen.during).not.toBe(0)
  }))

/**
 * WAL checkpoints on a worker thread: with a database file, the hub's own connection stops
 * checkpointing inside commits once the worker has made its first checkpoint, and starts again
 * when the worker stops; under writes that never pause, the WAL still starts over near its limit.
 * An in-memory database has no WAL and no worker.
 */
import { expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { hubConfigWith } from "../src/Config.js"
import { checkpointer, CheckpointerLive } from "../src/Sql/Checkpointer.js"
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

it.live("under commits that never pause, the WAL starts over near its limit instead of growing", () =>
  Effect.gen(function*() {
    const folder = mkdtempSync(join(tmpdir(), "hub-checkpoint-"))
    const file = join(folder, "hub.sqlite")
    const largestWal = Effect.gen(function*() {
      const scope = yield* Scope.make()
      yield* Layer.buildWithScope(checkpointer(256 * 1024), scope)
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`
      // 30,000 commits, each appending at least one 4 KB page: about 120 MB of WAL if it never
      // started over (measured). The worker checkpoints every 250 ms meanwhile, on its own thread.
      let largest = 0
      for (let i = 0; i < 30_000; i++) {
        yield* sql`INSERT INTO t (v) VALUES (${`row ${i}`})`
        if (i % 250 === 0) largest = Math.max(largest, statSync(`${file}-wal`).size)
      }
      yield* Scope.close(scope, Exit.void)
      return largest
    }).pipe(
      Effect.provide(Layer.provideMerge(sqliteLayer(file), hubConfigWith({ databaseFile: file }))),
      Effect.ensuring(Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
    )
    // Past the limit, the worker starts the WAL over at its next checkpoint, so it holds about a
    // quarter second of commits (33-36 MB here), not all of them.
    expect(yield* largestWal).toBeLessThan(64 * 1024 * 1024)
  }), 60_000)

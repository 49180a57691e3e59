/**
 * WAL checkpoints on a worker thread: with a database file, the hub's own connection stops
 * checkpointing inside commits once the worker has made its first checkpoint, and starts again
 * when the worker stops; under writes that never pause, the WAL still starts over near its limit.
 * An in-memory database has no WAL and no worker.
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import { mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { hubConfigWith } from "../src/Config.js"
import { checkpointer, CheckpointerLive } from "../src/Sql/Checkpointer.js"
import { sqliteLayer } from "../src/Sql/Client.js"

const autocheckpoint = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql<{ readonly wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`
).pipe(
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
    const seen = yield* withCheckpointer(join(folder, "hub.sqlite")).pipe(
      Effect.ensuring(Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
    )
    expect(seen).toEqual({ during: 0, after: 1000 })
  }))

it.live("an in-memory database keeps SQLite's own setting and starts no worker", () =>
  Effect.gen(function*() {
    const seen = yield* withCheckpointer(":memory:")
    expect(seen.during).toBe(seen.after)
    expect(seen.during).not.toBe(0)
  }))

it.live(
  "under commits that never pause, the WAL starts over and is cut back instead of growing",
  () =>
    Effect.gen(function*() {
      const folder = mkdtempSync(join(tmpdir(), "hub-checkpoint-"))
      const file = join(folder, "hub.sqlite")
      const limit = 256 * 1024
      const walSizes = Effect.gen(function*() {
        const scope = yield* Scope.make()
        yield* Layer.buildWithScope(checkpointer(limit), scope)
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)`
        // Each commit appends at least one 4 KB page: without the worker's RESTART the WAL only grows
        // (60,000 commits: about 240 MB). The worker checkpoints every 250 ms on its own thread, so
        // when it gets to run depends on the machine's load: the commits go on until the WAL has
        // been seen cut back (the signal), or all have been made.
        let largest = 0
        let cutBackTo: number | undefined
        for (let i = 1; i <= 60_000 && cutBackTo === undefined; i++) {
          yield* sql`INSERT INTO t (v) VALUES (${`row ${i}`})`
          if (i % 100 === 0) {
            const size = statSync(`${file}-wal`).size
            if (size < largest) cutBackTo = size
            largest = Math.max(largest, size)
          }
        }
        yield* Scope.close(scope, Exit.void)
        return { largest, cutBackTo }
      }).pipe(
        Effect.provide(Layer.provideMerge(sqliteLayer(file), hubConfigWith({ databaseFile: file }))),
        Effect.ensuring(Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
      )
      const seen = yield* walSizes
      // The WAL grew past the limit, then started over and was cut back near the limit
      // (journal_size_limit), with at most the hundred commits made since.
      expect(seen.largest).toBeGreaterThan(limit)
      expect(seen.cutBackTo).toBeDefined()
      expect(seen.cutBackTo ?? Infinity).toBeLessThan(limit + 100 * 8 * 1024)
    }),
  120_000
)

/**
 * Another connection holding SQLite's write lock (the checkpoint worker's RESTART, the CLI, a second
 * hub on the same file) makes the hub's transactions wait, not fail: a transaction that reads before
 * it writes used to be refused at once with "database is locked", and under event load about one
 * upstream post in a thousand answered 500 that way.
 */
import { expect, it } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteLayer } from "../src/Sql/Client.js"
import { WriteBatcher, WriteBatcherLive } from "../src/Sql/WriteBatcher.js"

/** How long the other process keeps the lock once it says it has it. */
const HOLD_MS = 300

/**
 * Another process takes the write lock, writes a row, says "locked", keeps the lock HOLD_MS, then
 * commits. Resolves once it holds the lock; `done` once it has exited.
 */
const otherWriter = (file: string) =>
  Effect.promise(async () => {
    const script = `
      const { Database } = require("bun:sqlite")
      const db = new Database(${JSON.stringify(file)})
      db.run("PRAGMA busy_timeout = 5000")
      db.run("BEGIN IMMEDIATE")
      db.run("INSERT INTO t (v) VALUES ('other')")
      console.log("locked")
      await Bun.sleep(${HOLD_MS})
      db.run("COMMIT")
      db.close()`
    const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "inherit" })
    const reader = child.stdout.getReader()
    const { value } = await reader.read()
    reader.releaseLock()
    return { said: new TextDecoder().decode(value).trim(), done: child.exited }
  })

/** Reads, then writes, in one transaction: the shape of the ingress's and the dispatcher's writes. */
const readThenWrite = (sql: SqlClient.SqlClient) =>
  sql.withTransaction(Effect.gen(function*() {
    const before = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM t`
    yield* sql`INSERT INTO t (v) VALUES ('hub')`
    return Number(before[0]?.n ?? -1)
  }))

const inFolder = <A, E>(use: (file: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "hub-locking-"))),
    (folder) => use(join(folder, "hub.sqlite")),
    (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
  )

const scenario = (file: string, write: Effect.Effect<number, unknown, SqlClient.SqlClient | WriteBatcher>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`
    const other = yield* otherWriter(file)
    expect(other.said).toBe("locked")
    const seenBefore = yield* write
    expect(yield* Effect.promise(() => other.done)).toBe(0)
    const rows = yield* sql<{ readonly v: string }>`SELECT v FROM t ORDER BY id`
    return { seenBefore, rows: rows.map((r) => r.v) }
  }).pipe(Effect.provide(WriteBatcherLive.pipe(Layer.provideMerge(sqliteLayer(file)))))

it.live("a transaction that reads before it writes waits for another connection's write lock, then commits", () =>
  inFolder((file) =>
    Effect.gen(function*() {
      const outcome = yield* scenario(file, Effect.flatMap(SqlClient.SqlClient, readThenWrite))
      // It began after the other writer committed: it saw that row, and its own came after.
      expect(outcome).toEqual({ seenBefore: 1, rows: ["other", "hub"] })
    })))

it.live("the write batcher's shared transaction waits the same way", () =>
  inFolder((file) =>
    Effect.gen(function*() {
      const outcome = yield* scenario(file, Effect.flatMap(Effect.zip(SqlClient.SqlClient, WriteBatcher), ([sql, batcher]) => batcher.run(readThenWrite(sql))))
      expect(outcome).toEqual({ seenBefore: 1, rows: ["other", "hub"] })
    })))

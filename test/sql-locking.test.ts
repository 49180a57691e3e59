/**
 * Another connection holding SQLite's write lock (the checkpoint worker's RESTART, the CLI, a second
 * hub on the same file) makes the hub's transactions wait, not fail: a transaction that reads before
 * it writes used to be refused at once with "database is locked", and at 1,000 events/s up to 45 of
 * 8,000 upstream posts answered 500 that way. Checked on the SQL client, on the write batcher, and
 * through the real HTTP server.
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Metrics } from "../src/Metrics/Metrics.js"
import { sqliteLayer } from "../src/Sql/Client.js"
import { WriteBatcher, WriteBatcherLive } from "../src/Sql/WriteBatcher.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, META_MESSAGES, signBody, wamid } from "./support/UpstreamPayloads.js"

/** How long the other process keeps the lock once it says it has it. */
const HOLD_MS = 300

/**
 * Another process takes the write lock, runs `write` (if any), says "locked", keeps the lock
 * HOLD_MS, then commits. Resolves once it holds the lock; `done` once it has exited.
 */
const otherWriter = (file: string, write?: string) =>
  Effect.promise(async () => {
    const script = `
      const { Database } = require("bun:sqlite")
      const db = new Database(${JSON.stringify(file)})
      db.run("PRAGMA busy_timeout = 5000")
      db.run("BEGIN IMMEDIATE")
      ${write === undefined ? "" : `db.run(${JSON.stringify(write)})`}
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
    const other = yield* otherWriter(file, "INSERT INTO t (v) VALUES ('other')")
    expect(other.said).toBe("locked")
    const seenBefore = yield* write
    expect(yield* Effect.promise(() => other.done)).toBe(0)
    const rows = yield* sql<{ readonly v: string }>`SELECT v FROM t ORDER BY id`
    return { seenBefore, rows: rows.map((r) => r.v) }
  }).pipe(Effect.provide(WriteBatcherLive.pipe(Layer.provideMerge(sqliteLayer(file)), Layer.provide(Metrics.Off))))

it.live("a transaction that reads before it writes waits for another connection's write lock, then commits", () =>
  inFolder((file) =>
    Effect.gen(function*() {
      const outcome = yield* scenario(file, Effect.flatMap(SqlClient.SqlClient, readThenWrite))
      // It began after the other writer committed: it saw that row, and its own came after.
      expect(outcome).toEqual({ seenBefore: 1, rows: ["other", "hub"] })
    })
  ))

it.live("the write batcher's shared transaction waits the same way", () =>
  inFolder((file) =>
    Effect.gen(function*() {
      const outcome = yield* scenario(
        file,
        Effect.flatMap(
          Effect.zip(SqlClient.SqlClient, WriteBatcher),
          ([sql, batcher]) => batcher.run(readThenWrite(sql))
        )
      )
      expect(outcome).toEqual({ seenBefore: 1, rows: ["other", "hub"] })
    })
  ))

const APP_SECRET = "app-secret-for-locking"

it.live("an upstream post that arrives while another connection holds the lock is answered 200 once it is released, and stored", () =>
  inFolder((file) =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const id = wamid()
      const body = JSON.stringify(envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.text, id })]]))
      const other = yield* otherWriter(file)
      expect(other.said).toBe("locked")
      const posted = yield* hub.request("POST", "/upstream/events", {
        body,
        headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
      })
      expect(yield* Effect.promise(() => other.done)).toBe(0)
      expect(posted.status).toBe(200)
      expect(posted.body).toEqual({ changes: 1, accepted: 1, duplicates: 0, unrouted: 0, deliveries: 0, stale: 0 })
      const inbound = yield* hub.request("GET", "/api/messages?direction=inbound", { token: tenant.instanceToken })
      expect(itemsOf(inbound.body).map((m) => m.waMessageId)).toEqual([id])
    }).pipe(Effect.provide(testHub({ databaseFile: file, appSecret: Option.some(Redacted.make(APP_SECRET)) })))
  ))

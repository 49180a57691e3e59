/**
 * Durable across power loss, not only across a crash of the process: the hub's database runs in WAL
 * mode with synchronous = FULL, so a commit (which precedes every 200 of an upstream post and every
 * recorded send) is flushed to the disk before it returns. NORMAL would leave it in the page cache.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteLayer } from "../src/Sql/Client.js"

layer(sqliteLayer(join(mkdtempSync(join(tmpdir(), "hub-durable-")), "hub.sqlite")), { excludeTestServices: true })(
  "the database file",
  (it) => {
    it.effect("is in WAL mode and flushes every commit to the disk (synchronous = FULL)", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        expect(yield* sql<{ readonly journal_mode: string }>`PRAGMA journal_mode`).toEqual([{ journal_mode: "wal" }])
        // 2 is FULL (0 OFF, 1 NORMAL, 3 EXTRA).
        expect(yield* sql<{ readonly synchronous: number }>`PRAGMA synchronous`).toEqual([{ synchronous: 2 }])
      }))
  }
)

/**
 * WAL checkpoints off the request path. By default SQLite checkpoints inside whichever COMMIT
 * crosses 1,000 WAL pages: under load that COMMIT takes 5–15 ms instead of 0.3 ms (measured), and
 * every request waiting on the group commit waits with it. A worker thread with its own connection
 * checkpoints instead (CheckpointWorker.ts), so the hub's connection turns its own checkpoints off.
 * If the worker cannot start or fails, SQLite's automatic checkpoints are turned back on.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Runtime } from "effect"
import { pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"
import { HubConfig } from "../Config.js"

/**
 * The worker's module, found from the entry point (src/main.ts): in the single binary this module is
 * bundled into main, so its own URL would not lead there. The build embeds the worker beside main.
 */
const workerFile = new URL("./Sql/CheckpointWorker.ts", pathToFileURL(Bun.main))

/** The WAL file is cut back to this size when a checkpoint lets it restart. */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024

export const CheckpointerLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    if (config.databaseFile === ":memory:") return
    const sql = yield* SqlClient.SqlClient
    const automatic = Effect.ignoreLogged(sql.unsafe("PRAGMA wal_autocheckpoint = 1000"))
    const worker = yield* Effect.acquireRelease(
      Effect.sync(() => new Worker(workerFile, { workerData: { file: config.databaseFile } })),
      (worker) => Effect.zipRight(Effect.promise(() => worker.terminate()), automatic)
    )
    const runFork = Runtime.runFork(yield* Effect.runtime<never>())
    const fallBack = (reason: string) =>
      runFork(Effect.zipRight(Effect.logWarning("WAL checkpoints are back inside commits", { reason }), automatic))
    worker.on("error", (error) => fallBack(String(error)))
    worker.on("message", (message: unknown) => {
      if (typeof message === "object" && message !== null && "error" in message) fallBack(String(message.error))
    })
    yield* sql.unsafe(`PRAGMA journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`)
    yield* sql.unsafe("PRAGMA wal_autocheckpoint = 0")
  }).pipe(Effect.orDie)
)

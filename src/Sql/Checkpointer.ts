/**
 * WAL checkpoints off the request path. By default SQLite checkpoints inside whichever COMMIT
 * crosses 1,000 WAL pages: under load that COMMIT takes 5–15 ms instead of 0.3 ms (measured), and
 * every request waiting on the group commit waits with it. A worker thread with its own connection
 * checkpoints instead (CheckpointWorker.ts); once it has done its first, the hub's connection turns
 * its own checkpoints off. If the worker cannot start or later fails, they are turned back on.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer, Runtime } from "effect"
import { existsSync } from "node:fs"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"
import { databaseEngine, HubConfig } from "../Config.js"

/**
 * The worker's module: beside this one when running from source; in the single binary this module
 * is bundled into main, and the build embeds the worker at its source path below main's.
 */
const workerFile = () => {
  const besideThis = new URL("./CheckpointWorker.ts", import.meta.url)
  return existsSync(fileURLToPath(besideThis))
    ? besideThis
    : new URL("./Sql/CheckpointWorker.ts", pathToFileURL(Bun.main))
}

/**
 * The WAL's size: past it, the worker makes the WAL start over (see CheckpointWorker.ts), and the
 * file is cut back to it when it does.
 */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024

const READY_TIMEOUT = Duration.seconds(5)

type WorkerSays = { readonly _tag: "Ready" } | { readonly _tag: "Failed"; readonly reason: string }

const said = (message: unknown): WorkerSays =>
  typeof message === "object" && message !== null && "ready" in message
    ? { _tag: "Ready" }
    : {
      _tag: "Failed",
      reason: typeof message === "object" && message !== null && "error" in message
        ? String(message.error)
        : String(message)
    }

/** Checkpoints on a worker thread, keeping the WAL near `walLimitBytes`. */
export const checkpointer = (walLimitBytes: number) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const config = yield* HubConfig
      // SQLite files only: PostgreSQL checkpoints itself.
      if (config.databaseFile === ":memory:" || databaseEngine(config.databaseFile) === "postgres") return
      const sql = yield* SqlClient.SqlClient
      const automatic = Effect.ignoreLogged(sql.unsafe("PRAGMA wal_autocheckpoint = 1000"))
      const fallBack = (reason: string) =>
        Effect.zipRight(Effect.logWarning("WAL checkpoints are back inside commits", { reason }), automatic)
      const worker = yield* Effect.acquireRelease(
        Effect.sync(() =>
          new Worker(workerFile(), { workerData: { file: config.databaseFile, restartAboveBytes: walLimitBytes } })
        ),
        (worker) => Effect.zipRight(Effect.promise(() => worker.terminate()), automatic)
      )
      const first = yield* Effect.async<WorkerSays>((resume) => {
        worker.once("message", (message: unknown) => resume(Effect.succeed(said(message))))
        worker.once("error", (error) => resume(Effect.succeed({ _tag: "Failed", reason: String(error) })))
      }).pipe(
        Effect.timeoutTo({
          duration: READY_TIMEOUT,
          onTimeout: (): WorkerSays => ({ _tag: "Failed", reason: "no first checkpoint in time" }),
          onSuccess: (s) => s
        })
      )
      if (first._tag === "Failed") return yield* fallBack(first.reason)
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      worker.on("error", (error) => runFork(fallBack(String(error))))
      worker.on("message", (message: unknown) => {
        const says = said(message)
        if (says._tag === "Failed") runFork(fallBack(says.reason))
      })
      yield* sql.unsafe(`PRAGMA journal_size_limit = ${walLimitBytes}`)
      yield* sql.unsafe("PRAGMA wal_autocheckpoint = 0")
    }).pipe(Effect.orDie)
  )

export const CheckpointerLive = checkpointer(WAL_SIZE_LIMIT_BYTES)

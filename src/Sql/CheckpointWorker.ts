/**
 * Runs on a worker thread (see Checkpointer.ts): copies the WAL back into the database file every
 * CHECKPOINT_EVERY_MS with a PASSIVE checkpoint, which never blocks the hub's writers or readers.
 * Its page writes and fsync happen here, on another core, instead of inside a request's COMMIT.
 * It says `ready` after its first checkpoint, and `error` if one fails.
 */
import { Database } from "bun:sqlite"
import { parentPort, workerData } from "node:worker_threads"

const CHECKPOINT_EVERY_MS = 250

const file: unknown = workerData?.file
if (typeof file === "string") {
  const db = new Database(file)
  db.run("PRAGMA busy_timeout = 5000")
  db.run("PRAGMA synchronous = NORMAL")
  const checkpoint = () => {
    try {
      db.run("PRAGMA wal_checkpoint(PASSIVE)")
      return true
    } catch (cause) {
      parentPort?.postMessage({ error: String(cause) })
      return false
    }
  }
  if (checkpoint()) parentPort?.postMessage({ ready: true })
  setInterval(checkpoint, CHECKPOINT_EVERY_MS)
}

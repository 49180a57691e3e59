/**
 * Runs on a worker thread (see Checkpointer.ts): copies the WAL back into the database file every
 * CHECKPOINT_EVERY_MS with a PASSIVE checkpoint, which never blocks the hub's writers or readers.
 * Its page writes and fsync happen here, on another core, instead of inside a request's COMMIT.
 *
 * Under writes that never pause, a PASSIVE checkpoint never catches up with the last commit, so the
 * WAL is never started over and grows without bound (637 MB in a 13-second benchmark run). Once
 * it holds more than `restartAboveBytes`, a RESTART checkpoint follows the PASSIVE one: it copies
 * what the PASSIVE one left (a few hundred milliseconds of commits) while holding writers back
 * (0.1–65 ms, measured), and the next commit starts the WAL over.
 * It says `ready` after its first checkpoint, and `error` if one fails.
 */
import { Database } from "bun:sqlite"
import { parentPort, workerData } from "node:worker_threads"

const CHECKPOINT_EVERY_MS = 250

const file: unknown = workerData?.file
const restartAboveBytes: unknown = workerData?.restartAboveBytes
if (typeof file === "string" && typeof restartAboveBytes === "number") {
  const db = new Database(file)
  db.run("PRAGMA busy_timeout = 5000")
  db.run("PRAGMA synchronous = NORMAL")
  const pageSize = db.query<{ readonly page_size: number }, []>("PRAGMA page_size").get()?.page_size ?? 4096
  const restartAboveFrames = Math.max(1, Math.floor(restartAboveBytes / pageSize))
  const checkpoint = () => {
    try {
      const passive = db.query<{ readonly log: number }, []>("PRAGMA wal_checkpoint(PASSIVE)").get()
      if (passive !== null && passive.log > restartAboveFrames) db.run("PRAGMA wal_checkpoint(RESTART)")
      return true
    } catch (cause) {
      parentPort?.postMessage({ error: String(cause) })
      return false
    }
  }
  if (checkpoint()) parentPort?.postMessage({ ready: true })
  setInterval(checkpoint, CHECKPOINT_EVERY_MS)
}

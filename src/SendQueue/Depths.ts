/**
 * Each number's queue depth as the bound (HUB_QUEUE_MAX_HOURS) reads it, kept in memory rather than
 * counted per request: a COUNT of the number's rows is read the first time, then again at most once a
 * RECONCILE_MS, in the background (the request goes on with what is known). Between reads the depth is the
 * count plus what this replica admitted since: sends being written count from their admission (so
 * concurrent requests cannot all take the last place), and are dropped again if their write fails.
 *
 * How close the bound is: this replica never goes past it by its own sends; other replicas' sends
 * (PostgreSQL fleet) are seen at the next read, so a fleet may overshoot by what its other replicas
 * queue within about a RECONCILE_MS, and sends drained meanwhile are still counted until then (a
 * 429 comes a little early, never late, from one replica's view).
 */
import type { SqlError } from "@effect/sql"
import { Exit } from "effect"

/** How often a number's depth is read from the database again while its sends come (at most). */
const RECONCILE_MS = 1_000

interface Depth {
  /** The count the last read gave. */
  base: number
  /** Sends of this replica committed since that read began. */
  added: number
  /** Sends admitted here whose write has not ended. */
  pending: number
  readAt: number
  reading: boolean
}

/** Whether the sends fit, or how deep the queue would be with them; Unavailable when the first read failed. */
export type Admission =
  | { readonly _tag: "Admitted" }
  | { readonly _tag: "Full"; readonly depth: number }
  | { readonly _tag: "Unavailable" }

const admitted: Admission = { _tag: "Admitted" }

export interface QueueDepths {
  /** Admits `count` sends of the number under `capacity`: at once when the number is known, a promise on its first read. */
  readonly admit: (phoneNumberId: string, count: number, capacity: number) => Admission | Promise<Admission>
  /** Admitted sends' write ended: committed (`written`) or not. */
  readonly settle: (phoneNumberId: string, count: number, written: boolean) => void
}

export const makeQueueDepths = (
  readDepth: (phoneNumberId: string) => Promise<Exit.Exit<number, SqlError.SqlError>>,
  now: () => number
): QueueDepths => {
  const depths = new Map<string, Depth>()
  const firstReads = new Map<string, Promise<Depth | undefined>>()

  /** Reads the count again; what was committed while the read ran is counted twice until the next (never too few). */
  const reconcile = (phoneNumberId: string, depth: Depth) => {
    depth.reading = true
    const addedBefore = depth.added
    const startedAt = now()
    void readDepth(phoneNumberId).then((read) => {
      depth.reading = false
      if (Exit.isFailure(read)) return
      depth.base = read.value
      depth.added -= addedBefore
      depth.readAt = startedAt
    })
  }

  const firstRead = (phoneNumberId: string) => {
    const pending = firstReads.get(phoneNumberId) ??
      readDepth(phoneNumberId).then((read) => {
        firstReads.delete(phoneNumberId)
        if (Exit.isFailure(read)) return undefined
        const depth = depths.get(phoneNumberId) ??
          { base: read.value, added: 0, pending: 0, readAt: now(), reading: false }
        depths.set(phoneNumberId, depth)
        return depth
      })
    firstReads.set(phoneNumberId, pending)
    return pending
  }

  const admitTo = (phoneNumberId: string, depth: Depth, count: number, capacity: number): Admission => {
    if (!depth.reading && now() - depth.readAt >= RECONCILE_MS) reconcile(phoneNumberId, depth)
    const total = depth.base + depth.added + depth.pending + count
    if (total > capacity) return { _tag: "Full", depth: total }
    depth.pending += count
    return admitted
  }

  return {
    admit: (phoneNumberId, count, capacity) => {
      const known = depths.get(phoneNumberId)
      if (known !== undefined) return admitTo(phoneNumberId, known, count, capacity)
      return firstRead(phoneNumberId).then((depth) =>
        depth === undefined ? { _tag: "Unavailable" } : admitTo(phoneNumberId, depth, count, capacity)
      )
    },
    settle: (phoneNumberId, count, written) => {
      const depth = depths.get(phoneNumberId)
      if (depth === undefined) return
      depth.pending -= count
      if (written) depth.added += count
    }
  }
}

/**
 * A soft memory target (HUB_MEMORY_TARGET_MB). JavaScriptCore sizes its heap for the machine's RAM,
 * so under load the hub lets garbage pile up far beyond what it keeps alive (on a 24 GB machine, a
 * busy send path held about 100 MB more than after a collection) and hands the pages back only after
 * a full collection. Above the target the hub asks for one every 100 ms: `Bun.gc(false)` starts it
 * without waiting for it (about 1 ms of this thread) and returns freed allocator pages. Under the
 * target, as an idle hub is, nothing is collected early.
 */
import { Duration, Effect, Layer, Schedule } from "effect"
import { HubConfig } from "./Config.js"

export interface MemoryProbe {
  /** The process's resident memory, in bytes. */
  readonly residentBytes: () => number
  /** Asks for a full collection without waiting for it. */
  readonly collect: () => void
}

const bunMemory: MemoryProbe = {
  residentBytes: () => process.memoryUsage.rss(),
  collect: () => Bun.gc(false)
}

export const MEMORY_CHECK_INTERVAL = Duration.millis(100)

/** Checks now and every MEMORY_CHECK_INTERVAL; collects while resident memory is over the target. */
export const keepUnder = (targetBytes: number, probe: MemoryProbe): Effect.Effect<void> =>
  Effect.sync(() => {
    if (probe.residentBytes() > targetBytes) probe.collect()
  }).pipe(Effect.repeat(Schedule.spaced(MEMORY_CHECK_INTERVAL)), Effect.asVoid)

/** Runs with the server; HUB_MEMORY_TARGET_MB=0 turns it off. */
export const MemoryTargetLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    if (config.memoryTargetMb === 0) return
    yield* Effect.forkScoped(keepUnder(config.memoryTargetMb * 1024 * 1024, bunMemory))
  })
)

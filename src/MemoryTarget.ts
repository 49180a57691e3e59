/**
 * A soft memory target (HUB_MEMORY_TARGET_MB). JavaScriptCore sizes its heap for the machine's RAM,
 * so under load the hub lets garbage pile up far beyond what it keeps alive (on a 24 GB machine, a
 * busy send path held about 100 MB more than after a collection) and hands the pages back only after
 * a full collection. Above the target the hub asks for one at each check (every 100 ms) without
 * waiting for it (`Bun.gc(false)`, about 1 ms of this thread). That did not keep up with event
 * overload, which peaked at 260-280 MB for a 200 MB target; so 15 % above the target the hub runs
 * one and waits for it (overload then peaked at 213-253 MB, at the same rate). Waiting costs: a
 * synchronous collection at every check cost the send path about 15 % of its rate, so they take at
 * most 5 % of the time (after one that took d ms, the next waits 20·d ms), and only this far above
 * the target. Under the target, as an idle hub is, nothing is collected early.
 */
import { Clock, Duration, Effect, Layer, Schedule } from "effect"
import { HubConfig } from "./Config.js"

export interface MemoryProbe {
  /** The process's resident memory, in bytes. */
  readonly residentBytes: () => number
  /** Asks for a full collection without waiting for it. */
  readonly requestCollection: () => void
  /** Runs a full collection; returns the milliseconds it took. */
  readonly collect: () => number
}

const bunMemory: MemoryProbe = {
  residentBytes: () => process.memoryUsage.rss(),
  requestCollection: () => Bun.gc(false),
  collect: () => {
    const started = performance.now()
    Bun.gc(true)
    return performance.now() - started
  }
}

export const MEMORY_CHECK_INTERVAL = Duration.millis(100)

/** How far over the target the hub waits for a collection rather than only asking for one. */
export const WAITING_ABOVE = 1.15

/** The most of the time collections waited for may take. */
export const MAX_COLLECTING_SHARE = 0.05

/**
 * Checks now and every MEMORY_CHECK_INTERVAL. Over the target it asks for a collection; further
 * over (WAITING_ABOVE) it runs one, no sooner after the last than keeps them within MAX_COLLECTING_SHARE.
 */
export const keepUnder = (targetBytes: number, probe: MemoryProbe): Effect.Effect<void> =>
  Effect.suspend(() => {
    let quietUntil = 0
    return Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        const resident = probe.residentBytes()
        if (resident <= targetBytes) return
        if (resident > targetBytes * WAITING_ABOVE && now >= quietUntil) {
          quietUntil = now + probe.collect() / MAX_COLLECTING_SHARE
        } else probe.requestCollection()
      })).pipe(Effect.repeat(Schedule.spaced(MEMORY_CHECK_INTERVAL)), Effect.asVoid)
  })

/** Runs with the server; HUB_MEMORY_TARGET_MB=0 turns it off. */
export const MemoryTargetLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    if (config.memoryTargetMb === 0) return
    yield* Effect.forkScoped(keepUnder(config.memoryTargetMb * 1024 * 1024, bunMemory))
  })
)

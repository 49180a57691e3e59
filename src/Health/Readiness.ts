/**
 * Readiness during a rolling restart: from the moment the hub is told to stop (SIGTERM or SIGINT),
 * `/ready` answers 503 "draining", so a load balancer stops sending it new requests while it finishes
 * what it has (deliveries in flight, up to HUB_DISPATCH_DRAIN_TIMEOUT, and sends in flight) and
 * releases its leases for the other replicas. `/health` (liveness) stays 200 until the process ends.
 * With HUB_SHUTDOWN_DELAY the hub first keeps serving everything for that long, /ready aside, so a
 * load balancer's next probes see it not ready and move its traffic before it stops answering.
 */
import { Context, Duration, Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"

export class Readiness extends Context.Tag("Readiness")<Readiness, {
  /** Whether the hub is stopping. */
  readonly draining: () => boolean
  /** Marks the hub as stopping. */
  readonly drain: () => void
}>() {}

/** Readiness, turned to draining by SIGTERM or SIGINT (the runtime's own handlers then stop the hub). */
export const ReadinessLive = Layer.scoped(
  Readiness,
  Effect.gen(function*() {
    let draining = false
    const drain = () => {
      draining = true
    }
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        process.on("SIGTERM", drain)
        process.on("SIGINT", drain)
      }),
      () =>
        Effect.sync(() => {
          process.off("SIGTERM", drain)
          process.off("SIGINT", drain)
        })
    )
    return Readiness.of({ draining: () => draining, drain })
  })
)

/**
 * Waits HUB_SHUTDOWN_DELAY when the hub begins to stop. Built after the hub (provide the hub to it),
 * so it is released first: the hub serves, not ready, while it waits.
 */
export const ShutdownDelayLive = Layer.scopedDiscard(
  Effect.flatMap(HubConfig, (config) =>
    Effect.addFinalizer(() =>
      Duration.toMillis(config.shutdownDelay) > 0
        ? Effect.zipRight(Effect.logInfo("Stopping: not ready, still serving").pipe(Effect.annotateLogs({ delay: Duration.format(config.shutdownDelay) })), Effect.sleep(config.shutdownDelay))
        : Effect.void))
)

/**
 * Readiness during a rolling restart: from the moment the hub is told to stop (SIGTERM or SIGINT),
 * `/ready` answers 503 "draining", so a load balancer stops sending it new requests while it finishes
 * what it has (deliveries in flight, up to HUB_DISPATCH_DRAIN_TIMEOUT, and sends in flight) and
 * releases its leases for the other replicas. `/health` (liveness) stays 200 until the process ends.
 * With HUB_SHUTDOWN_DELAY the hub first keeps serving everything for that long, /ready aside, so a
 * load balancer's next probes see it not ready and move its traffic before it stops answering.
 */
import { Context, Deferred, Duration, Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"

export class Readiness extends Context.Tag("Readiness")<Readiness, {
  /** Whether the hub is stopping. */
  readonly draining: () => boolean
  /** Marks the hub as stopping (a stop signal, or the dispatcher beginning its drain). */
  readonly drain: () => void
  /** Succeeds once the hub is stopping. */
  readonly whenDraining: Effect.Effect<void>
}>() {}

/** Readiness, turned to draining when the hub begins to stop. */
export const ReadinessLive = Layer.effect(
  Readiness,
  Effect.map(Deferred.make<void>(), (stopping) => {
    let draining = false
    return Readiness.of({
      draining: () => draining,
      drain: () => {
        draining = true
        Deferred.unsafeDone(stopping, Effect.void)
      },
      whenDraining: Deferred.await(stopping)
    })
  })
)

/** SIGTERM or SIGINT turn the hub to draining at once (the runtime's own handlers then stop it). */
export const StopSignalsLive = Layer.scopedDiscard(
  Effect.flatMap(Readiness, (readiness) =>
    Effect.acquireRelease(
      Effect.sync(() => {
        process.on("SIGTERM", readiness.drain)
        process.on("SIGINT", readiness.drain)
      }),
      () =>
        Effect.sync(() => {
          process.off("SIGTERM", readiness.drain)
          process.off("SIGINT", readiness.drain)
        })
    ))
)

/**
 * Waits HUB_SHUTDOWN_DELAY when the hub begins to stop. Built after the hub (provide the hub to it),
 * so it is released first: the hub serves, not ready, while it waits.
 */
export const ShutdownDelayLive = Layer.scopedDiscard(
  Effect.flatMap(HubConfig, (config) =>
    Effect.addFinalizer(() =>
      Duration.toMillis(config.shutdownDelay) > 0
        ? Effect.zipRight(
          Effect.logInfo("Stopping: not ready, still serving").pipe(
            Effect.annotateLogs({ delay: Duration.format(config.shutdownDelay) })
          ),
          Effect.sleep(config.shutdownDelay)
        )
        : Effect.void
    ))
)

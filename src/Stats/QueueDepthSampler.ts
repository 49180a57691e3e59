/**
 * The send queue's depth, written once a minute for the overview's chart: the queue's rows leave it
 * once sent, so its past cannot be read back (migration 0022). Every replica samples; each writes the
 * same minute's row per number (an upsert of what the shared database holds), so a fleet never counts
 * twice and a replica that stops leaves the others sampling.
 */
import { Clock, Duration, Effect, Layer, Schedule } from "effect"
import { SendQueueRepo } from "../SendQueue/Repo.js"
import { minuteOf, StatsRepo } from "./Repo.js"

const SAMPLE_EVERY = Duration.minutes(1)

export class QueueDepthSampler extends Effect.Service<QueueDepthSampler>()("QueueDepthSampler", {
  effect: Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const stats = yield* StatsRepo
    /** Reads each number's depth now and writes it as this minute's sample; answers the minute and what was written. */
    const sampleNow = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const minute = minuteOf(new Date(now).toISOString())
      const readings = yield* queue.readings(now)
      yield* stats.writeDepths(minute, readings)
      return { minute, depths: readings.map((r) => ({ phoneNumberId: r.phoneNumberId, depth: r.depth })) }
    }).pipe(Effect.withSpan("QueueDepthSampler.sampleNow"))
    return { sampleNow } as const
  }),
  dependencies: [SendQueueRepo.Default, StatsRepo.Default]
}) {}

/** Samples at start, then every minute (on the clock's fixed beat, so no minute drifts away), while the server runs. */
export const QueueDepthSamplingLive = Layer.scopedDiscard(
  Effect.flatMap(QueueDepthSampler, (sampler) =>
    sampler.sampleNow.pipe(
      Effect.catchAllCause((cause) =>
        Effect.logWarning("Sampling the queue depth failed; the next minute tries again", cause)
      ),
      Effect.repeat(Schedule.fixed(SAMPLE_EVERY)),
      Effect.forkScoped
    ))
)

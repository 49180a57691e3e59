/**
 * The metrics kept in a prom-client registry (the Prometheus client most Node services use, and it
 * runs unchanged under Bun and in the compiled binary). Each hub has its own registry, so several
 * hubs in one process (the tests) keep their own counts; the process metrics (memory, CPU, event
 * loop lag: prom-client's defaults) are the process's and are collected once, beside them
 * (ProcessMetrics.ts). The metrics themselves are declared in Instruments.ts.
 *
 * Every label set an observation may take is bound when the hub starts (statuses as they first
 * occur), so an observation is a call on a bound child: about 0.1 µs for a counter and 0.3 µs for
 * a histogram; a send's three (its request, its result, its Graph call) about 0.9 µs together,
 * against the 130-160 µs of CPU a send costs (scripts/bench.ts).
 */
import { Effect, Layer } from "effect"
import { type Counter, type Histogram, Registry } from "prom-client"
import { HubConfig } from "../Config.js"
import { makeRouteFinder, type RouteOf } from "../Domain/Routes.js"
import type { AutomaticDisabledReason } from "../Domain/Vocabulary.js"
import { type HubInstruments, registerHubInstruments } from "./Instruments.js"
import {
  type AttemptOutcome,
  type GraphOutcome,
  type GraphRecorder,
  type HubMetrics,
  Metrics,
  type OutboxReading,
  type QueueReading,
  type RouteRecorder,
  type SendResult
} from "./Metrics.js"
import { processMetrics } from "./ProcessMetrics.js"

/** The label of a request that matched no route (a mistyped path, a scanner): one series, not one per path. */
const UNMATCHED = "unmatched"

/** The recorder of one route's requests, over the request histogram. */
const routeRecorders = (requests: HubInstruments["requests"]) => (method: string, route: string): RouteRecorder => {
  // Statuses are bound as they first occur: a route answers a handful.
  const byStatus = new Map<number, Histogram.Internal<string>>()
  return {
    observe: (status, seconds) => {
      let child = byStatus.get(status)
      if (child === undefined) {
        child = requests.labels(method, route, String(status))
        byStatus.set(status, child)
      }
      child.observe(seconds)
    }
  }
}

const sendCounters = (sends: HubInstruments["sends"]): Readonly<Record<SendResult, Counter.Internal>> => ({
  sent: sends.labels("sent"),
  throttled: sends.labels("throttled"),
  upstream_throttled: sends.labels("upstream_throttled"),
  refused: sends.labels("refused"),
  failed: sends.labels("failed"),
  overloaded: sends.labels("overloaded"),
  not_recorded: sends.labels("not_recorded")
})

/** The recorder of one Graph call kind, bound on its first call and kept. */
const graphRecorders = (graphCalls: HubInstruments["graphCalls"]) => {
  const known = new Map<string, GraphRecorder>()
  return (call: string): GraphRecorder => {
    const recorder = known.get(call)
    if (recorder !== undefined) return recorder
    const byOutcome: Readonly<Record<GraphOutcome, Histogram.Internal<string>>> = {
      ok: graphCalls.labels(call, "ok"),
      refused: graphCalls.labels(call, "refused"),
      throttled: graphCalls.labels(call, "throttled"),
      upstream_error: graphCalls.labels(call, "upstream_error"),
      timeout: graphCalls.labels(call, "timeout"),
      network_error: graphCalls.labels(call, "network_error")
    }
    const bound: GraphRecorder = { observe: (outcome, seconds) => byOutcome[outcome].observe(seconds) }
    known.set(call, bound)
    return bound
  }
}

const attemptHistograms = (
  attempts: HubInstruments["attempts"]
): Readonly<Record<AttemptOutcome, Histogram.Internal<string>>> => ({
  succeeded: attempts.labels("succeeded"),
  failed: attempts.labels("failed"),
  dead: attempts.labels("dead")
})

const disabledCounters = (
  disabled: HubInstruments["disabled"]
): Readonly<Record<AutomaticDisabledReason, Counter.Internal>> => ({
  gone_410: disabled.labels("gone_410"),
  failing_too_long: disabled.labels("failing_too_long")
})

/** Counts one committed group's upstream posts and what they brought. */
const ingestRecorder = (
  { changes, duplicates, posts, queued, unrouted }: HubInstruments
): HubMetrics["ingested"] =>
(answers) => {
  let changed = 0
  let duplicated = 0
  let kept = 0
  let deliveries = 0
  for (const answer of answers) {
    changed += answer.changes
    duplicated += answer.duplicates
    kept += answer.unrouted
    deliveries += answer.deliveries
  }
  posts.inc(answers.length)
  changes.inc(changed)
  duplicates.inc(duplicated)
  unrouted.inc(kept)
  queued.inc(deliveries)
}

/** The outbox gauges, set at each scrape by the readers registered while their scope is open. */
const outboxGauges = ({ oldestDue, outbox, waiting }: HubInstruments) => {
  const byState = {
    due: outbox.labels("due"),
    leased: outbox.labels("leased"),
    failed: outbox.labels("failed"),
    dead: outbox.labels("dead")
  }
  const readers = new Set<Effect.Effect<OutboxReading>>()
  const show = (reading: OutboxReading) => {
    byState.due.set(reading.due)
    byState.leased.set(reading.leased)
    byState.failed.set(reading.failed)
    byState.dead.set(reading.dead)
    waiting.set(reading.waiting)
    oldestDue.set(reading.oldestDueAgeSeconds)
  }
  // A failed read shows no outbox figures rather than stale ones; the rest of the scrape still answers.
  const read = Effect.forEach(readers, (reader) =>
    reader.pipe(
      Effect.tap((reading) => show(reading)),
      Effect.catchAllCause((cause) =>
        Effect.zipRight(
          Effect.sync(() => {
            outbox.reset()
            waiting.reset()
            oldestDue.reset()
          }),
          Effect.logWarning("The outbox could not be read for the metrics", cause)
        )
      )
    ), { discard: true })
  const readAtScrape: HubMetrics["outboxAtScrape"] = (reader) =>
    Effect.acquireRelease(Effect.sync(() => readers.add(reader)), () => Effect.sync(() => readers.delete(reader)))
  return { read, readAtScrape }
}

/**
 * The send queues' gauges, set at each scrape from the readers registered while their scope is open:
 * a number no longer queued drops out (reset), so the series follow the numbers that have sends.
 */
const queueGauges = ({ queueDepth, queueOldestWait }: HubInstruments) => {
  const readers = new Set<Effect.Effect<ReadonlyArray<QueueReading>>>()
  const read = Effect.forEach(readers, (reader) =>
    reader.pipe(
      Effect.tap((readings) =>
        Effect.sync(() => {
          queueDepth.reset()
          queueOldestWait.reset()
          for (const reading of readings) {
            queueDepth.labels(reading.phoneNumberId).set(reading.depth)
            queueOldestWait.labels(reading.phoneNumberId).set(reading.oldestWaitSeconds)
          }
        })
      ),
      Effect.catchAllCause((cause) =>
        Effect.zipRight(
          Effect.sync(() => {
            queueDepth.reset()
            queueOldestWait.reset()
          }),
          Effect.logWarning("The send queues could not be read for the metrics", cause)
        )
      )
    ), { discard: true })
  const readAtScrape: HubMetrics["queueAtScrape"] = (reader) =>
    Effect.acquireRelease(Effect.sync(() => readers.add(reader)), () => Effect.sync(() => readers.delete(reader)))
  return { read, readAtScrape }
}

/** A hub's metrics over its own registry; `routes` are the routes HttpApi serves (see Routes.ts). */
const makeMetrics = (routes: ReadonlyArray<RouteOf>) =>
  Effect.sync((): HubMetrics => {
    const registry = new Registry()
    const instruments = registerHubInstruments(registry)
    const route = routeRecorders(instruments.requests)
    const sends = sendCounters(instruments.sends)
    const attempts = attemptHistograms(instruments.attempts)
    const disabled = disabledCounters(instruments.disabled)
    const commits = instruments.commits
    const outbox = outboxGauges(instruments)
    const queues = queueGauges(instruments)
    const exposed = Registry.merge([processMetrics(), registry])
    return {
      enabled: true,
      route,
      routeOf: makeRouteFinder(routes, route, (method) => route(method, UNMATCHED)),
      send: (result) => sends[result].inc(),
      graphCall: graphRecorders(instruments.graphCalls),
      ingested: ingestRecorder(instruments),
      attempt: (outcome, seconds) => attempts[outcome].observe(seconds),
      webhookDisabled: (reason) => disabled[reason].inc(),
      commit: (seconds) => commits.observe(seconds),
      queueSend: (phoneNumberId, outcome) => instruments.queueSends.labels(phoneNumberId, outcome).inc(),
      queueAtScrape: queues.readAtScrape,
      outboxAtScrape: outbox.readAtScrape,
      scrape: Effect.zipRight(
        Effect.zipRight(outbox.read, queues.read),
        Effect.promise(() => exposed.metrics())
      ),
      contentType: exposed.contentType
    }
  })

/** The hub's metrics as HUB_METRICS says: kept (the default) or not at all. */
export const metricsLayer = (routes: ReadonlyArray<RouteOf>) =>
  Layer.unwrapEffect(
    Effect.map(HubConfig, (config) => (config.metrics ? Layer.effect(Metrics, makeMetrics(routes)) : Metrics.Off))
  )

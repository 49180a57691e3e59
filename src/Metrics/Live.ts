/**
 * The metrics kept in a prom-client registry (the Prometheus client most Node services use, and it
 * runs unchanged under Bun and in the compiled binary). Each hub has its own registry, so several
 * hubs in one process (the tests) keep their own counts; the process metrics (memory, CPU, event
 * loop lag: prom-client's defaults) are the process's and are collected once, beside them.
 *
 * Every label set an observation may take is bound when the hub starts (statuses as they first
 * occur), so an observation is a call on a bound child: about 0.1 µs for a counter and 0.3 µs for
 * a histogram; a send's three (its request, its result, its Graph call) about 0.9 µs together,
 * against the 130-160 µs of CPU a send costs (scripts/bench.ts).
 */
import { heapStats } from "bun:jsc"
import { Effect, Layer } from "effect"
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client"
import { HubConfig } from "../Config.js"
import { makeRouteFinder, type RouteOf } from "../Domain/Routes.js"
import type { AutomaticDisabledReason } from "../Domain/Vocabulary.js"
import {
  type AttemptOutcome,
  type GraphOutcome,
  type GraphRecorder,
  type HubMetrics,
  Metrics,
  OUTBOX_COUNT_CAP,
  type OutboxReading,
  type RouteRecorder,
  type SendResult
} from "./Metrics.js"

/** The label of a request that matched no route (a mistyped path, a scanner): one series, not one per path. */
const UNMATCHED = "unmatched"

/** From a millisecond (a cached read) to 30 s (a slow upstream at its deadline). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
/** A shared transaction takes from a tenth of a millisecond to, in trouble, seconds (the busy timeout is 5 s). */
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5]

let processRegistry: Registry | undefined

/**
 * The process's own metrics, collected once whatever the number of hubs (the event loop monitor runs for good).
 * Under Bun, prom-client's heap figures mislead: `process_heap_bytes` reads the whole data segment
 * (6 GB beside a 220 MB resident set, measured) and `nodejs_heap_size_total_bytes` less than the heap
 * in use. The first goes; the heap's sizes are read from JavaScriptCore's own statistics instead.
 */
const processMetrics = () => {
  if (processRegistry === undefined) {
    const registry = new Registry()
    collectDefaultMetrics({ register: registry })
    for (
      const name of [
        "process_heap_bytes",
        "nodejs_heap_size_total_bytes",
        "nodejs_heap_size_used_bytes",
        "nodejs_external_memory_bytes"
      ]
    ) {
      registry.removeSingleMetric(name)
    }
    // One reading sets the three; registered first, so a scrape reads it before the other two.
    new Gauge({
      name: "nodejs_heap_size_total_bytes",
      help: "JavaScript heap capacity (JavaScriptCore), in bytes",
      registers: [registry],
      collect() {
        const heap = heapStats()
        this.set(heap.heapCapacity)
        used.set(heap.heapSize)
        external.set(heap.extraMemorySize)
      }
    })
    const used = new Gauge({
      name: "nodejs_heap_size_used_bytes",
      help: "JavaScript heap in use (JavaScriptCore), in bytes",
      registers: [registry]
    })
    const external = new Gauge({
      name: "nodejs_external_memory_bytes",
      help: "Memory outside the heap that heap objects hold (JavaScriptCore), in bytes",
      registers: [registry]
    })
    processRegistry = registry
  }
  return processRegistry
}

/** A hub's metrics over its own registry; `routes` are the routes HttpApi serves (see Routes.ts). */
const makeMetrics = (routes: ReadonlyArray<RouteOf>) =>
  Effect.gen(function*() {
    const registry = new Registry()
    const registers = [registry]

    const requests = new Histogram({
      name: "hub_http_request_duration_seconds",
      help: "HTTP requests answered, by method, route pattern and status, and how long each took to answer",
      labelNames: ["method", "route", "status"],
      buckets: LATENCY_BUCKETS,
      registers
    })
    const sends = new Counter({
      name: "hub_sends_total",
      help: "Message sends, by result",
      labelNames: ["result"],
      registers
    })
    const graphCalls = new Histogram({
      name: "hub_graph_call_duration_seconds",
      help: "Graph API calls, by call and outcome, and how long each took (retries of a read included)",
      labelNames: ["call", "outcome"],
      buckets: LATENCY_BUCKETS,
      registers
    })
    const posts = new Counter({
      name: "hub_upstream_posts_total",
      help: "Upstream posts committed (their events and deliveries stored)",
      registers
    })
    const changes = new Counter({
      name: "hub_upstream_changes_total",
      help: "Changes in the upstream posts committed",
      registers
    })
    const duplicates = new Counter({
      name: "hub_upstream_duplicate_changes_total",
      help: "Changes the hub already had (redelivered by the upstream), skipped",
      registers
    })
    const unrouted = new Counter({
      name: "hub_upstream_unrouted_changes_total",
      help: "Changes for numbers no instance is bound to, kept aside (unrouted_events)",
      registers
    })
    const queued = new Counter({
      name: "hub_deliveries_queued_total",
      help: "Deliveries queued to webhooks by the upstream posts committed",
      registers
    })
    const attempts = new Histogram({
      name: "hub_delivery_attempt_duration_seconds",
      help:
        "Webhook delivery attempts, by outcome (succeeded; failed, to be retried; dead, the last), and how long each took",
      labelNames: ["outcome"],
      buckets: LATENCY_BUCKETS,
      registers
    })
    const disabled = new Counter({
      name: "hub_webhooks_disabled_total",
      help: "Webhooks the hub disabled, by reason",
      labelNames: ["reason"],
      registers
    })
    const commits = new Histogram({
      name: "hub_sql_commit_duration_seconds",
      help: "Shared write transactions (group commits), from BEGIN to COMMIT",
      buckets: COMMIT_BUCKETS,
      registers
    })
    const outbox = new Gauge({
      name: "hub_outbox_deliveries",
      help: "Deliveries in the outbox by state (due, leased by this process, failed awaiting a retry, dead), " +
        `each counted up to ${OUTBOX_COUNT_CAP}`,
      labelNames: ["state"],
      registers
    })
    const oldestDue = new Gauge({
      name: "hub_outbox_oldest_due_age_seconds",
      help: "How long the oldest due delivery not yet taken has been due (0 when none is)",
      registers
    })

    const routeRecorder = (method: string, route: string): RouteRecorder => {
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
    const routeOf = makeRouteFinder(routes, routeRecorder, (method) => routeRecorder(method, UNMATCHED))

    const sendCounters: Readonly<Record<SendResult, Counter.Internal>> = {
      sent: sends.labels("sent"),
      throttled: sends.labels("throttled"),
      upstream_throttled: sends.labels("upstream_throttled"),
      refused: sends.labels("refused"),
      failed: sends.labels("failed"),
      overloaded: sends.labels("overloaded"),
      not_recorded: sends.labels("not_recorded")
    }
    const graphRecorders = new Map<string, GraphRecorder>()
    const graphCall = (call: string): GraphRecorder => {
      const known = graphRecorders.get(call)
      if (known !== undefined) return known
      const byOutcome: Readonly<Record<GraphOutcome, Histogram.Internal<string>>> = {
        ok: graphCalls.labels(call, "ok"),
        refused: graphCalls.labels(call, "refused"),
        throttled: graphCalls.labels(call, "throttled"),
        upstream_error: graphCalls.labels(call, "upstream_error"),
        timeout: graphCalls.labels(call, "timeout"),
        network_error: graphCalls.labels(call, "network_error")
      }
      const recorder: GraphRecorder = { observe: (outcome, seconds) => byOutcome[outcome].observe(seconds) }
      graphRecorders.set(call, recorder)
      return recorder
    }
    const attemptHistograms: Readonly<Record<AttemptOutcome, Histogram.Internal<string>>> = {
      succeeded: attempts.labels("succeeded"),
      failed: attempts.labels("failed"),
      dead: attempts.labels("dead")
    }
    const disabledCounters: Readonly<Record<AutomaticDisabledReason, Counter.Internal>> = {
      gone_410: disabled.labels("gone_410"),
      failing_too_long: disabled.labels("failing_too_long")
    }
    const outboxGauges = {
      due: outbox.labels("due"),
      leased: outbox.labels("leased"),
      failed: outbox.labels("failed"),
      dead: outbox.labels("dead")
    }

    const readers = new Set<Effect.Effect<OutboxReading>>()
    const setOutbox = (reading: OutboxReading) => {
      outboxGauges.due.set(reading.due)
      outboxGauges.leased.set(reading.leased)
      outboxGauges.failed.set(reading.failed)
      outboxGauges.dead.set(reading.dead)
      oldestDue.set(reading.oldestDueAgeSeconds)
    }
    // A failed read shows no outbox figures rather than stale ones; the rest of the scrape still answers.
    const readOutbox = Effect.forEach(readers, (read) =>
      read.pipe(
        Effect.tap((reading) => setOutbox(reading)),
        Effect.catchAllCause((cause) =>
          Effect.zipRight(
            Effect.sync(() => {
              outbox.reset()
              oldestDue.reset()
            }),
            Effect.logWarning("The outbox could not be read for the metrics", cause)
          )
        )
      ), { discard: true })

    const exposed = Registry.merge([processMetrics(), registry])

    return {
      enabled: true,
      route: routeRecorder,
      routeOf,
      send: (result) => sendCounters[result].inc(),
      graphCall,
      ingested: (answers) => {
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
      },
      attempt: (outcome, seconds) => attemptHistograms[outcome].observe(seconds),
      webhookDisabled: (reason) => disabledCounters[reason].inc(),
      commit: (seconds) => commits.observe(seconds),
      outboxAtScrape: (read) =>
        Effect.acquireRelease(Effect.sync(() => readers.add(read)), () => Effect.sync(() => readers.delete(read))),
      scrape: Effect.zipRight(readOutbox, Effect.promise(() => exposed.metrics())),
      contentType: exposed.contentType
    } satisfies HubMetrics
  })

/** The hub's metrics as HUB_METRICS says: kept (the default) or not at all. */
export const metricsLayer = (routes: ReadonlyArray<RouteOf>) =>
  Layer.unwrapEffect(
    Effect.map(HubConfig, (config) => (config.metrics ? Layer.effect(Metrics, makeMetrics(routes)) : Metrics.Off))
  )

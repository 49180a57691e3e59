/** The hub's own metrics as prom-client declares them (names, help, labels, buckets), in one hub's registry. */
import { Counter, Gauge, Histogram, type Registry } from "prom-client"
import { OUTBOX_COUNT_CAP } from "./Metrics.js"

/** From a millisecond (a cached read) to 30 s (a slow upstream at its deadline). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
/** A shared transaction takes from a tenth of a millisecond to, in trouble, seconds (the busy timeout is 5 s). */
const COMMIT_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5]

/** Declares the hub's metrics in `registry`; Live.ts binds their label sets. */
export const registerHubInstruments = (registry: Registry) => {
  const registers = [registry]
  return {
    requests: new Histogram({
      name: "hub_http_request_duration_seconds",
      help: "HTTP requests answered, by method, route pattern and status, and how long each took to answer",
      labelNames: ["method", "route", "status"],
      buckets: LATENCY_BUCKETS,
      registers
    }),
    sends: new Counter({
      name: "hub_sends_total",
      help: "Message sends, by result",
      labelNames: ["result"],
      registers
    }),
    graphCalls: new Histogram({
      name: "hub_graph_call_duration_seconds",
      help: "Graph API calls, by call and outcome, and how long each took (retries of a read included)",
      labelNames: ["call", "outcome"],
      buckets: LATENCY_BUCKETS,
      registers
    }),
    posts: new Counter({
      name: "hub_upstream_posts_total",
      help: "Upstream posts committed (their events and deliveries stored)",
      registers
    }),
    changes: new Counter({
      name: "hub_upstream_changes_total",
      help: "Changes in the upstream posts committed",
      registers
    }),
    duplicates: new Counter({
      name: "hub_upstream_duplicate_changes_total",
      help: "Changes the hub already had (redelivered by the upstream), skipped",
      registers
    }),
    unrouted: new Counter({
      name: "hub_upstream_unrouted_changes_total",
      help: "Changes for numbers no instance is bound to, kept aside (unrouted_events)",
      registers
    }),
    queued: new Counter({
      name: "hub_deliveries_queued_total",
      help: "Deliveries queued to webhooks by the upstream posts committed",
      registers
    }),
    attempts: new Histogram({
      name: "hub_delivery_attempt_duration_seconds",
      help:
        "Webhook delivery attempts, by outcome (succeeded; failed, to be retried; dead, the last), and how long each took",
      labelNames: ["outcome"],
      buckets: LATENCY_BUCKETS,
      registers
    }),
    disabled: new Counter({
      name: "hub_webhooks_disabled_total",
      help: "Webhooks the hub disabled, by reason",
      labelNames: ["reason"],
      registers
    }),
    commits: new Histogram({
      name: "hub_sql_commit_duration_seconds",
      help: "Shared write transactions (group commits), from BEGIN to COMMIT",
      buckets: COMMIT_BUCKETS,
      registers
    }),
    outbox: new Gauge({
      name: "hub_outbox_deliveries",
      help: "Deliveries in the outbox by state (due, leased by this process, failed awaiting a retry, dead), " +
        `each counted up to ${OUTBOX_COUNT_CAP}`,
      labelNames: ["state"],
      registers
    }),
    queueSends: new Counter({
      name: "hub_queue_sends_total",
      help: "Queued sends' attempts by number and outcome: sent, retried (Meta said later), or the reason given up " +
        "(refused, expired, outcome_unknown); its rate is the number's queued sends a second",
      labelNames: ["phone_number_id", "outcome"],
      registers
    }),
    queueDepth: new Gauge({
      name: "hub_queue_depth",
      help: "Queued sends per number (waiting, held or being sent)",
      labelNames: ["phone_number_id"],
      registers
    }),
    queueOldestWait: new Gauge({
      name: "hub_queue_oldest_wait_seconds",
      help: "Per number, how long the oldest queued send whose time has come has waited (0 when none waits)",
      labelNames: ["phone_number_id"],
      registers
    }),
    waiting: new Gauge({
      name: "hub_dispatch_waiting",
      help: "Deliveries this process holds leased that wait in memory for a slot at their receivers " +
        "(part of hub_outbox_deliveries{state=\"leased\"}; up to 4 times the shares, 32 for quick receivers)",
      registers
    }),
    oldestDue: new Gauge({
      name: "hub_outbox_oldest_due_age_seconds",
      help: "How long the oldest due delivery not yet taken has been due (0 when none is)",
      registers
    })
  }
}

/** One hub's metrics, as registerHubInstruments declared them. */
export type HubInstruments = ReturnType<typeof registerHubInstruments>

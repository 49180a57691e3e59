/**
 * The hub's metrics, as the code that observes them sees them: plain functions, bound once to their
 * labels, that record an observation without an effect, an allocation of labels or a lookup by name
 * (the send and upstream-post paths run without a fiber; see Messages/Send.ts and Edge/FastLane.ts).
 * metricsLayer (Live.ts) keeps them in a prom-client registry served at GET /metrics; `Metrics.Off`
 * keeps nothing (HUB_METRICS=false, and tests of a single service). Every service that observes
 * requires Metrics: none is built without being told which.
 */
import { Context, Effect, Layer, type Scope } from "effect"
import type { AutomaticDisabledReason, FailureReason } from "../Domain/Vocabulary.js"

/** How a send ended (Messages/Send.ts): the result label of hub_sends_total. */
export type SendResult =
  /** The upstream accepted it. */
  | "sent"
  /** The hub's own pacing refused it (429 rate_limited). */
  | "throttled"
  /** The upstream throttled it (429 upstream_rate_limited). */
  | "upstream_throttled"
  /** The upstream refused it with a 4xx (a bad recipient, template, parameter…). */
  | "refused"
  /** The upstream failed, timed out, could not be reached or refused the instance's access token. */
  | "failed"
  /** Refused at once: too many sends in flight (503 overloaded). */
  | "overloaded"
  /** Its record could not be written, so nothing was sent (503 storage_unavailable). */
  | "not_recorded"

/** How a Graph call ended: ok, or why not. */
export type GraphOutcome = "ok" | "refused" | "throttled" | "upstream_error" | "timeout" | "network_error"

/** How a delivery attempt ended: a 2xx, a failure to be retried, or the last failure (the delivery is dead). */
export type AttemptOutcome = "succeeded" | "failed" | "dead"

/** Why the hub disabled a webhook (Delivery/Attempt.ts). */

/** Records the requests of one route (method and pattern): their status and duration. */
export interface RouteRecorder {
  readonly observe: (status: number, seconds: number) => void
}

/** Records the calls of one Graph call kind: their outcome and duration. */
export interface GraphRecorder {
  readonly observe: (outcome: GraphOutcome, seconds: number) => void
}

/** What one upstream post's commit brought (Ingress.ts's answer to it). */
interface IngestCounts {
  readonly changes: number
  readonly duplicates: number
  readonly unrouted: number
  readonly deliveries: number
}

/** Most rows a scrape counts for each outbox state: past it a count says "at least this many". */
export const OUTBOX_COUNT_CAP = 10_000

/** The outbox as a scrape reads it (Delivery/OutboxStates.ts), each count stopping at OUTBOX_COUNT_CAP. */
export interface OutboxReading {
  /** Queued deliveries whose attempt time has come and that nobody holds (waiting for a dispatcher). */
  readonly due: number
  /** Deliveries this process holds leased (attempts in flight or about to start). */
  readonly leased: number
  /** Of those, the ones waiting in memory for a slot at their receivers (Delivery/StartGate.ts). */
  readonly waiting: number
  /** Deliveries that failed and wait for their next attempt's time. */
  readonly failed: number
  /** Deliveries that ran out of attempts. */
  readonly dead: number
  /** How long the oldest due delivery has been due, in seconds; 0 when none is. */
  readonly oldestDueAgeSeconds: number
}

/** A number's send queue as a scrape reads it (SendQueue/Repo.ts `readings`). */
export interface QueueReading {
  readonly phoneNumberId: string
  /** Queued sends (waiting, held or sending). */
  readonly depth: number
  /** How long the oldest send whose time has come has waited, in seconds; 0 when none waits. */
  readonly oldestWaitSeconds: number
}

/** What became of a queued send's attempt: made, to be tried again, or given up with its reason. */
type QueueSendOutcome = "sent" | "retried" | FailureReason

export interface HubMetrics {
  /** Whether observations are kept and GET /metrics serves them. */
  readonly enabled: boolean
  /** The recorder of a route known in advance (the fast lane's): method and pattern. */
  readonly route: (method: string, pattern: string) => RouteRecorder
  /** The recorder of a request as HttpApi receives it: its route's pattern found from its path (`unmatched` for none). */
  readonly routeOf: (method: string, url: string) => RouteRecorder
  readonly send: (result: SendResult) => void
  /** The recorder of one Graph call kind (named as the Upstream service's method). */
  readonly graphCall: (call: string) => GraphRecorder
  /** The upstream posts of one committed group, each with what its commit brought. */
  readonly ingested: (posts: ReadonlyArray<IngestCounts>) => void
  readonly attempt: (outcome: AttemptOutcome, seconds: number) => void
  readonly webhookDisabled: (reason: AutomaticDisabledReason) => void
  /** One shared transaction of the WriteBatcher, from its BEGIN to its COMMIT's answer. */
  readonly commit: (seconds: number) => void
  /** A queued send's attempt and its outcome, per number (its rate is the number's sends a second). */
  readonly queueSend: (phoneNumberId: string, outcome: QueueSendOutcome) => void
  /** Reads the send queues at each scrape with `read`, until the scope closes. */
  readonly queueAtScrape: (
    read: Effect.Effect<ReadonlyArray<QueueReading>>
  ) => Effect.Effect<void, never, Scope.Scope>
  /** Reads the outbox at each scrape with `read`, until the scope closes. */
  readonly outboxAtScrape: (read: Effect.Effect<OutboxReading>) => Effect.Effect<void, never, Scope.Scope>
  /** The metrics in Prometheus' text format, the outbox read first. */
  readonly scrape: Effect.Effect<string>
  /** The Content-Type of the text `scrape` makes. */
  readonly contentType: string
}

const nothing = () => {}
const ignored: RouteRecorder & GraphRecorder = { observe: nothing }

/** Metrics that keep nothing. */
export const noMetrics: HubMetrics = {
  enabled: false,
  route: () => ignored,
  routeOf: () => ignored,
  send: nothing,
  graphCall: () => ignored,
  ingested: nothing,
  attempt: nothing,
  webhookDisabled: nothing,
  commit: nothing,
  queueSend: nothing,
  queueAtScrape: () => Effect.void,
  outboxAtScrape: () => Effect.void,
  scrape: Effect.succeed(""),
  contentType: "text/plain; version=0.0.4; charset=utf-8"
}

export class Metrics extends Context.Tag("Metrics")<Metrics, HubMetrics>() {
  /** No metrics: nothing is observed or kept (HUB_METRICS=false). */
  static readonly Off = Layer.succeed(this, noMetrics)
}

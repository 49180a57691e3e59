/**
 * One delivery attempt: sign with the webhook's secret(s) (both during a rotation; Credentials.ts),
 * POST to the checked address with the webhook's custom headers, classify the answer (any 2xx
 * succeeds; 3xx, other statuses, timeouts and refused addresses fail) into the attempt to log; after
 * logging, 410 or days of failures disable the webhook (WebhooksRepo.deactivate).
 * The exchange itself is a plain promise: the dispatcher runs many at once without a fiber each.
 */
import { Duration, Effect, FiberRef, LogLevel, type Tracer } from "effect"
import { HubConfig } from "../Config.js"
import { Metrics } from "../Metrics/Metrics.js"
import { Deadline } from "../Net/Deadline.js"
import { parseRetryAfter } from "../Net/RetryAfter.js"
import { AddressRefused, UrlPolicy } from "../Net/UrlPolicy.js"
import { SecretCipher } from "../Sql/SecretCipher.js"
import { annotate, endSpan, HubTracer, parentOf, startSpan, traceparentOf } from "../Tracing/Spans.js"
import { WebhooksRepo } from "../Webhooks/Repo.js"
import { type Credentials, deliveryHeaders, makeCredentials } from "./Credentials.js"
import type { AttemptRecord, AttemptResult, LeasedDelivery } from "./Records.js"
import { afterFailure } from "./RetryPolicy.js"
import { makeSender, NoAnswer, type ReceiverAnswer, type Sender, USER_AGENT } from "./Sender.js"

const iso = (ms: number) => new Date(ms).toISOString()

const describeFailure = (answer: ReceiverAnswer) =>
  answer.status >= 300 && answer.status < 400
    ? `the receiver answered ${answer.status} (a redirect, which is not followed)`
    : `the receiver answered ${answer.status}`

/** What the dispatcher does with a leased delivery (see Dispatcher.ts). */
export interface Deliveries {
  /** What a delivery is signed and sent with (decrypted once per secret, not once per attempt). */
  readonly credentials: (d: LeasedDelivery, nowMs: number) => Effect.Effect<Credentials>
  /** Sends one attempt; undefined when `shutdown` aborted it (the attempt is then not logged). */
  readonly attempt: (
    d: LeasedDelivery,
    credentials: Credentials,
    shutdown: AbortSignal
  ) => Promise<AttemptRecord | undefined>
  /** Once attempts are logged: a 410, or failures without a success for too long, disable the webhook. */
  readonly afterLogged: (
    records: ReadonlyArray<AttemptRecord>,
    failingSince: ReadonlyMap<string, string>
  ) => Effect.Effect<void>
}

/**
 * Each logged attempt's outcome: a success at debug (skipped without building it when debug is off:
 * there may be thousands a second), a failure to be retried at warn, a dead delivery at error.
 */
const logAttempts = (records: ReadonlyArray<AttemptRecord>) =>
  Effect.flatMap(FiberRef.get(FiberRef.currentMinimumLogLevel), (minimum) =>
    Effect.forEach(records, (record) => {
      const result = record.result
      if (result._tag === "Succeeded" && !LogLevel.lessThanEqual(minimum, LogLevel.Debug)) return Effect.void
      const fields = {
        webhookId: record.delivery.webhook_id,
        deliveryId: record.delivery.id,
        attempt: record.attempt,
        status: record.statusCode,
        latencyMs: record.latencyMs,
        ...(record.error === null ? {} : { error: record.error })
      }
      const logged = result._tag === "Succeeded"
        ? Effect.logDebug("Webhook delivery succeeded")
        : result._tag === "RetryAt"
        ? Effect.logWarning("Webhook delivery failed; it will be retried").pipe(
          Effect.annotateLogs("retryAt", result.at)
        )
        : Effect.logError("Webhook delivery dead: no more attempts")
      return Effect.annotateLogs(logged, fields)
    }, { discard: true }))

/** Why a failed attempt turns its webhook off: a 410, or failures since `since` for `disableAfterMs` or more; undefined to keep it. */
const disabledFor = (record: AttemptRecord, since: string | undefined, disableAfterMs: number) =>
  record.statusCode === 410
    ? "gone_410"
    : since !== undefined && Date.parse(record.finishedAt) - Date.parse(since) >= disableAfterMs
    ? "failing_too_long"
    : undefined

/** What an attempt needs that outlives it: the address check, the pool, the timeout and the retry schedule. */
interface AttemptContext {
  readonly policy: UrlPolicy["Type"]
  readonly sender: Sender
  readonly metrics: Metrics["Type"]
  readonly timeoutMs: number
  readonly retrySchedule: ReadonlyArray<Duration.Duration>
  /** When tracing: each attempt is a span under its event's traceparent (Tracing/Spans.ts). */
  readonly tracer: Tracer.Tracer | undefined
}

/** The POST: the address checked (a refusal is answered, not thrown), the body signed, the custom headers sent. */
const makeHttpCall = async (
  context: AttemptContext,
  d: LeasedDelivery,
  credentials: Credentials,
  signal: AbortSignal,
  timestamp: number,
  span: Tracer.Span | undefined
) => {
  const target = await context.policy.connectTarget(d.url, signal)
  if (target instanceof AddressRefused) return target
  return context.sender.send({
    target,
    body: d.body,
    timeoutMs: context.timeoutMs,
    signal,
    headers: {
      ...deliveryHeaders(credentials, d.message_id, timestamp, d.body),
      "user-agent": USER_AGENT,
      // When tracing, the receiver may carry the trace on (W3C Trace Context).
      ...(span === undefined ? {} : { traceparent: traceparentOf(span) })
    }
  })
}

/**
 * The attempt to log, from what the exchange gave: any 2xx succeeds; anything else (an answer, none,
 * or a refused address) is retried or the delivery dead (RetryPolicy.ts).
 */
const attemptRecord = (
  context: AttemptContext,
  d: LeasedDelivery,
  answer: ReceiverAnswer | NoAnswer | AddressRefused,
  startedMs: number,
  finishedMs: number
): AttemptRecord => {
  const noAnswer = answer instanceof NoAnswer || answer instanceof AddressRefused ? answer : undefined
  const received = answer instanceof NoAnswer || answer instanceof AddressRefused ? undefined : answer
  const statusCode = received?.status ?? null
  const succeeded = received !== undefined && received.status >= 200 && received.status < 300
  const result: AttemptResult = succeeded ? { _tag: "Succeeded" } : afterFailure({
    attempt: d.attempts + 1,
    finalAttempt: d.final_attempt,
    schedule: context.retrySchedule,
    statusCode,
    retryAfterSeconds: parseRetryAfter(received?.retryAfter, finishedMs),
    nowMs: finishedMs,
    random: Math.random()
  })
  return {
    delivery: d,
    attempt: d.attempts + 1,
    startedAt: iso(startedMs),
    finishedAt: iso(finishedMs),
    latencyMs: finishedMs - startedMs,
    statusCode,
    error: noAnswer !== undefined
      ? noAnswer.message
      : received === undefined || succeeded
      ? null
      : describeFailure(received),
    responseSnippet: received?.snippet ?? null,
    result
  }
}

/** An attempt's span: a child of its event's commit (any replica, any retry), named by ids only. */
const attemptSpan = (tracer: Tracer.Tracer, d: LeasedDelivery) =>
  startSpan(tracer, "Delivery.attempt", parentOf(d.traceparent), "client", {
    "hub.delivery_id": d.id,
    "hub.webhook_id": d.webhook_id,
    "hub.event_id": d.event_id,
    "hub.organization_id": d.organization_id,
    "hub.webhook_message_id": d.message_id,
    "hub.attempt": d.attempts + 1,
    "http.request.method": "POST",
    // The receiver's host only: a URL's path or query may hold a customer's token.
    "server.address": URL.parse(d.url)?.hostname
  })

/** Ends an attempt's span with its outcome (an error unless the receiver answered 2xx). */
const endAttemptSpan = (span: Tracer.Span, record: AttemptRecord) => {
  annotate(span, {
    "http.response.status_code": record.statusCode ?? undefined,
    "hub.attempt_result": record.result._tag
  })
  endSpan(span, record.result._tag === "Succeeded" ? undefined : record.error ?? "the attempt failed")
}

/** One attempt, start to record; undefined when `shutdown` aborted it (the attempt is then not logged). */
const attemptDelivery = async (
  context: AttemptContext,
  d: LeasedDelivery,
  credentials: Credentials,
  shutdown: AbortSignal
): Promise<AttemptRecord | undefined> => {
  const startedMs = Date.now()
  const span = context.tracer === undefined ? undefined : attemptSpan(context.tracer, d)
  // The timeout bounds the whole exchange, the answer's snippet included; the shutdown ends it too.
  const deadline = new Deadline(context.timeoutMs, shutdown)
  const answer = await makeHttpCall(context, d, credentials, deadline.signal, Math.floor(startedMs / 1000), span)
    .finally(() => deadline.settle())
  if (shutdown.aborted) {
    if (span !== undefined) endSpan(span, "the hub stopped before the attempt ended")
    return undefined
  }
  const finishedMs = Date.now()
  const record = attemptRecord(context, d, answer, startedMs, finishedMs)
  if (span !== undefined) endAttemptSpan(span, record)
  context.metrics.attempt(
    record.result._tag === "Succeeded" ? "succeeded" : record.result._tag === "RetryAt" ? "failed" : "dead",
    (finishedMs - startedMs) / 1000
  )
  return record
}

/** Once attempts are logged: a 410, or failures without a success for `disableAfterMs`, disable the webhook. */
const disableFailingWebhooks = (
  webhooks: WebhooksRepo,
  metrics: Metrics["Type"],
  disableAfterMs: number,
  records: ReadonlyArray<AttemptRecord>,
  failingSince: ReadonlyMap<string, string>
) =>
  Effect.gen(function*() {
    const disabled = new Set<string>()
    for (const record of records) {
      const webhookId = record.delivery.webhook_id
      if (disabled.has(webhookId) || record.result._tag === "Succeeded") continue
      const reason = disabledFor(record, failingSince.get(webhookId), disableAfterMs)
      if (reason === undefined) continue
      disabled.add(webhookId)
      // Another attempt may have disabled it already (one that finished in an earlier round).
      if (!(yield* webhooks.deactivate(webhookId, reason))) continue
      metrics.webhookDisabled(reason)
      yield* Effect.logError("Webhook disabled").pipe(Effect.annotateLogs({ webhookId, reason }))
    }
  })

export const makeDeliveries = Effect.gen(function*() {
  const config = yield* HubConfig
  const metrics = yield* Metrics
  const webhooks = yield* WebhooksRepo
  const cipher = yield* SecretCipher
  const disableAfterMs = Duration.toMillis(config.webhookDisableAfter)
  // As many idle connections per receiver as attempts may be in flight; closed with the dispatcher.
  const sender = yield* Effect.acquireRelease(
    Effect.sync(() =>
      makeSender({ maxIdlePerOrigin: config.dispatchConcurrency, maxPerOrigin: config.maxConnectionsPerOrigin })
    ),
    (s) => Effect.sync(() => s.close())
  )
  const context: AttemptContext = {
    policy: yield* UrlPolicy,
    sender,
    metrics,
    timeoutMs: Duration.toMillis(config.webhookTimeout),
    retrySchedule: config.webhookRetry,
    tracer: yield* HubTracer
  }
  const deliveries: Deliveries = {
    credentials: makeCredentials(cipher),
    attempt: (d, credentials, shutdown) => attemptDelivery(context, d, credentials, shutdown),
    afterLogged: (records, failingSince) =>
      Effect.zipRight(
        logAttempts(records),
        disableFailingWebhooks(webhooks, metrics, disableAfterMs, records, failingSince)
      )
  }
  return deliveries
})

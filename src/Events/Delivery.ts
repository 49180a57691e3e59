/**
 * One delivery attempt: sign with the webhook's secret(s) (both during a rotation), POST to the
 * checked address, classify the answer (any 2xx succeeds; 3xx, other statuses, timeouts and refused
 * addresses fail) into the attempt to log; after logging, 410 or days of failures disable the webhook.
 * The exchange itself is a plain promise: the dispatcher runs many at once without a fiber each.
 */
import { Duration, Effect, FiberRef, LogLevel } from "effect"
import { HubConfig } from "../Config.js"
import { AccessTokenCipher } from "../Instances/AccessTokenCipher.js"
import { WebhooksRepo } from "../Webhooks/Repo.js"
import { AddressRefused, UrlPolicy } from "../Webhooks/UrlPolicy.js"
import type { AttemptRecord, AttemptResult, LeasedDelivery } from "./Outbox.js"
import { afterFailure, parseRetryAfter } from "./RetryPolicy.js"
import { makeSender, NoAnswer, type ReceiverAnswer, USER_AGENT } from "./Sender.js"
import { webhookSecretKey, webhookSignature } from "./Signing.js"

const iso = (ms: number) => new Date(ms).toISOString()

const describeFailure = (answer: ReceiverAnswer) =>
  answer.status >= 300 && answer.status < 400
    ? `the receiver answered ${answer.status} (a redirect, which is not followed)`
    : `the receiver answered ${answer.status}`

export interface Deliveries {
  /** The keys to sign a delivery with: the current secret, and the previous one while a rotation's overlap lasts. */
  readonly signingKeys: (d: LeasedDelivery, nowMs: number) => Effect.Effect<ReadonlyArray<Uint8Array>>
  /** Sends one attempt; undefined when `shutdown` aborted it (the attempt is then not logged). */
  readonly attempt: (d: LeasedDelivery, keys: ReadonlyArray<Uint8Array>, shutdown: AbortSignal) => Promise<AttemptRecord | undefined>
  /** Once attempts are logged: a 410, or failures without a success for too long, disable the webhook. */
  readonly afterLogged: (records: ReadonlyArray<AttemptRecord>, failingSince: ReadonlyMap<string, string>) => Effect.Effect<void>
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
        ? Effect.logWarning("Webhook delivery failed; it will be retried").pipe(Effect.annotateLogs("retryAt", result.at))
        : Effect.logError("Webhook delivery dead: no more attempts")
      return Effect.annotateLogs(logged, fields)
    }, { discard: true }))

export const makeDeliveries = Effect.gen(function*() {
  const config = yield* HubConfig
  const webhooks = yield* WebhooksRepo
  const policy = yield* UrlPolicy
  const cipher = yield* AccessTokenCipher
  const timeoutMs = Duration.toMillis(config.webhookTimeout)
  const disableAfterMs = Duration.toMillis(config.webhookDisableAfter)
  // As many idle connections per receiver as attempts may be in flight; closed with the dispatcher.
  const sender = yield* Effect.acquireRelease(
    Effect.sync(() => makeSender({ maxIdlePerOrigin: config.dispatchConcurrency })),
    (s) => Effect.sync(() => s.close())
  )

  // Decrypting once per secret rather than once per attempt keeps the hot path cheap.
  const keys = new Map<string, Uint8Array>()
  const keyOf = (encrypted: string) =>
    Effect.suspend(() => {
      const known = keys.get(encrypted)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(Effect.orDie(cipher.decrypt(encrypted)), (secret) => {
        if (keys.size > 10_000) keys.clear()
        const key = webhookSecretKey(secret)
        keys.set(encrypted, key)
        return key
      })
    })

  const signingKeys = (d: LeasedDelivery, nowMs: number): Effect.Effect<ReadonlyArray<Uint8Array>> => {
    const secrets = d.previous_secret_encrypted !== null && d.previous_secret_expires_at !== null &&
        Date.parse(d.previous_secret_expires_at) > nowMs
      ? [d.secret_encrypted, d.previous_secret_encrypted]
      : [d.secret_encrypted]
    // Every attempt asks: keys already decrypted are answered without an effect per secret.
    const known = secrets.map((secret) => keys.get(secret))
    return known.every((key): key is Uint8Array => key !== undefined) ? Effect.succeed(known) : Effect.forEach(secrets, keyOf)
  }

  const exchange = async (d: LeasedDelivery, keys: ReadonlyArray<Uint8Array>, signal: AbortSignal, timestamp: number) => {
    const target = await policy.resolveTarget(d.url)
    if (target instanceof AddressRefused) return target
    return sender.send({
      target,
      body: d.body,
      timeoutMs,
      signal,
      headers: {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": d.message_id,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": webhookSignature(keys, d.message_id, timestamp, d.body)
      }
    })
  }

  const attempt = async (d: LeasedDelivery, keys: ReadonlyArray<Uint8Array>, shutdown: AbortSignal): Promise<AttemptRecord | undefined> => {
    const startedMs = Date.now()
    // The timeout bounds the whole exchange, the answer's snippet included. Its timer is cleared as
    // soon as the attempt ends (AbortSignal.timeout would keep every timer alive for the full timeout).
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError")), timeoutMs)
    const stop = () => controller.abort(shutdown.reason)
    shutdown.addEventListener("abort", stop)
    const answer = await exchange(d, keys, controller.signal, Math.floor(startedMs / 1000)).finally(() => {
      clearTimeout(timer)
      shutdown.removeEventListener("abort", stop)
    })
    if (shutdown.aborted) return undefined
    const finishedMs = Date.now()
    const noAnswer = answer instanceof NoAnswer || answer instanceof AddressRefused ? answer : undefined
    const received = answer instanceof NoAnswer || answer instanceof AddressRefused ? undefined : answer
    const statusCode = received?.status ?? null
    const succeeded = received !== undefined && received.status >= 200 && received.status < 300
    const result: AttemptResult = succeeded ? { _tag: "Succeeded" } : afterFailure({
      attempt: d.attempts + 1,
      finalAttempt: d.final_attempt,
      schedule: config.webhookRetry,
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
      error: noAnswer !== undefined ? noAnswer.message : received === undefined || succeeded ? null : describeFailure(received),
      responseSnippet: received?.snippet ?? null,
      result
    }
  }

  const afterLogged = (records: ReadonlyArray<AttemptRecord>, failingSince: ReadonlyMap<string, string>) =>
    Effect.gen(function*() {
      yield* logAttempts(records)
      const disabled = new Set<string>()
      for (const record of records) {
        const webhookId = record.delivery.webhook_id
        if (disabled.has(webhookId) || record.result._tag === "Succeeded") continue
        const since = failingSince.get(webhookId)
        const reason = record.statusCode === 410
          ? "the receiver answered 410 Gone"
          : since !== undefined && Date.parse(record.finishedAt) - Date.parse(since) >= disableAfterMs
          ? `no successful delivery since ${since}`
          : undefined
        if (reason === undefined) continue
        disabled.add(webhookId)
        yield* webhooks.disable(webhookId, reason)
        yield* Effect.logError("Webhook disabled").pipe(Effect.annotateLogs({ webhookId, reason }))
      }
    })

  const deliveries: Deliveries = { signingKeys, attempt, afterLogged }
  return deliveries
})

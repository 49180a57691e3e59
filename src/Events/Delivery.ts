/**
 * One delivery attempt: sign with the webhook's secret(s) (both during a rotation), POST to the
 * checked address, classify the answer (any 2xx succeeds; 3xx, other statuses, timeouts and refused
 * addresses fail), log the attempt and move the delivery on; 410 or days of failures disable the webhook.
 */
import { Duration, Effect } from "effect"
import { HubConfig } from "../Config.js"
import { AccessTokenCipher } from "../Instances/AccessTokenCipher.js"
import { WebhooksRepo } from "../Webhooks/Repo.js"
import { UrlPolicy } from "../Webhooks/UrlPolicy.js"
import { type AttemptResult, type LeasedDelivery, OutboxRepo } from "./Outbox.js"
import { afterFailure, parseRetryAfter } from "./RetryPolicy.js"
import { postWebhook, type ReceiverAnswer, USER_AGENT } from "./Sender.js"
import { webhookSecretKey, webhookSignature } from "./Signing.js"

const iso = (ms: number) => new Date(ms).toISOString()

const describeFailure = (answer: ReceiverAnswer) =>
  answer.status >= 300 && answer.status < 400
    ? `the receiver answered ${answer.status} (a redirect, which is not followed)`
    : `the receiver answered ${answer.status}`

/** Makes the attempt function of a dispatcher; `owner` is its lease owner id. Undefined when nothing was sent. */
export const makeDeliver = (owner: string) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const outbox = yield* OutboxRepo
    const webhooks = yield* WebhooksRepo
    const policy = yield* UrlPolicy
    const cipher = yield* AccessTokenCipher
    const timeoutMs = Duration.toMillis(config.webhookTimeout)
    const disableAfterMs = Duration.toMillis(config.webhookDisableAfter)

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

    /** The current secret, and the previous one while a rotation's overlap lasts. */
    const signingKeys = (d: LeasedDelivery, nowMs: number) =>
      Effect.all([
        keyOf(d.secret_encrypted),
        ...(d.previous_secret_encrypted !== null && d.previous_secret_expires_at !== null &&
            Date.parse(d.previous_secret_expires_at) > nowMs
          ? [keyOf(d.previous_secret_encrypted)]
          : [])
      ])

    return (d: LeasedDelivery): Effect.Effect<AttemptResult | undefined> =>
      Effect.gen(function*() {
        if (!Boolean(d.webhook_active)) {
          yield* outbox.cancel([d.id])
          return undefined
        }
        const startedMs = Date.now()
        const timestamp = Math.floor(startedMs / 1000)
        const signature = webhookSignature(yield* signingKeys(d, startedMs), d.message_id, timestamp, d.body)
        const answer = yield* policy.connectTarget(d.url).pipe(
          Effect.flatMap((target) =>
            postWebhook({
              target,
              body: d.body,
              timeoutMs,
              headers: {
                "content-type": "application/json",
                "user-agent": USER_AGENT,
                "webhook-id": d.message_id,
                "webhook-timestamp": String(timestamp),
                "webhook-signature": signature
              }
            })
          ),
          Effect.either
        )
        const finishedMs = Date.now()
        const received = answer._tag === "Right" ? answer.right : undefined
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
        const failingSince = yield* outbox.recordAttempt({
          delivery: d,
          owner,
          attempt: d.attempts + 1,
          startedAt: iso(startedMs),
          finishedAt: iso(finishedMs),
          latencyMs: finishedMs - startedMs,
          statusCode,
          error: answer._tag === "Left" ? answer.left.message : succeeded ? null : describeFailure(answer.right),
          responseSnippet: received?.snippet ?? null,
          result
        })
        if (statusCode === 410) {
          yield* webhooks.disable(d.webhook_id, "the receiver answered 410 Gone")
        } else if (failingSince !== null && finishedMs - Date.parse(failingSince) >= disableAfterMs) {
          yield* webhooks.disable(d.webhook_id, `no successful delivery since ${failingSince}`)
        }
        return result
      })
  })

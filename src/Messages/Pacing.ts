/**
 * Per phone number pacing of sends (HUB_SEND_RATE, default 80/s as the upstream allows): a token bucket
 * per phone_number_id holding up to one second's worth of sends. Over the limit the hub answers 429 with
 * Retry-After instead of letting the upstream throttle the number. In memory: one hub process paces its
 * own sends (several processes would each get the full rate).
 */
import { Context, Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import { TooManyRequests } from "../Domain/Errors.js"

interface Bucket {
  tokens: number
  at: number
}

export class Pacing extends Context.Tag("Pacing")<Pacing, {
  /**
   * Takes one send from the number's budget at `now` (epoch ms): undefined, or the 429 saying when
   * one is free again. Plain, for the send core (see Send.ts), which passes its Clock's time.
   */
  readonly takeAt: (phoneNumberId: string, now: number) => TooManyRequests | undefined
}>() {}

export const makePacing = (ratePerSecond: number): Pacing["Type"] => {
  const buckets = new Map<string, Bucket>()
  const takeAt = (phoneNumberId: string, now: number) => {
    const bucket = buckets.get(phoneNumberId) ?? { tokens: ratePerSecond, at: now }
    // Clamped: callers may read the clock in one order and get here in another.
    const elapsed = Math.max(0, now - bucket.at)
    bucket.tokens = Math.min(ratePerSecond, bucket.tokens + (elapsed * ratePerSecond) / 1000)
    bucket.at = Math.max(bucket.at, now)
    buckets.set(phoneNumberId, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return undefined
    }
    return new TooManyRequests({
      message: `Too many sends from phone number ${phoneNumberId}: the hub paces each number at ${ratePerSecond} messages per second`,
      error: "rate_limited",
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerSecond))
    })
  }
  return Pacing.of({ takeAt })
}

export const PacingLive = Layer.effect(Pacing, Effect.map(HubConfig, (config) => makePacing(config.sendRatePerSecond)))

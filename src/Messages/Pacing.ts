/**
 * Per phone number pacing of sends, at the number's live throughput (PhoneNumbers/Throughput.ts: Meta's
 * level, 80/s standard, capped by HUB_SEND_RATE when set): at most that many sends a second per
 * phone_number_id, with bursts up to one second's worth. Over the limit a synchronous send is answered
 * 429 with Retry-After instead of letting the upstream throttle the number; a queued send waits its turn.
 *
 * - SQLite (one process): a token bucket per number in memory.
 * - PostgreSQL (a fleet of replicas): the budget is shared, so the rate holds for the fleet, not per
 *   replica; each replica spends slices of it from memory (SharedPacing.ts).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Runtime } from "effect"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { isPostgres } from "../Sql/Dialect.js"
import { BULK_YIELD, type Lane, makeContention, type RateOf, type TakeAt, tooMany } from "./PacingRules.js"
import { grantQuery, makeSharedPacing } from "./SharedPacing.js"

interface Bucket {
  tokens: number
  at: number
}

export class Pacing extends Context.Tag("Pacing")<Pacing, {
  /**
   * Takes one send from the number's budget at `now` (epoch ms): undefined, or the 429 saying when
   * one is free again. Plain, for the send core (see Send.ts), which passes its Clock's time; on
   * PostgreSQL a promise of that when the replica's slice is spent and the shared budget is asked.
   */
  readonly takeAt: TakeAt
}>() {}

const makePacing = (rateOf: RateOf): Pacing["Type"] => {
  const buckets = new Map<string, Bucket>()
  const contention = makeContention()
  const takeAt = (phoneNumberId: string, now: number, lane: Lane = "first") => {
    const ratePerSecond = rateOf(phoneNumberId)
    const bucket = buckets.get(phoneNumberId) ?? { tokens: ratePerSecond, at: now }
    // Clamped: callers may read the clock in one order and get here in another.
    const elapsed = Math.max(0, now - bucket.at)
    bucket.tokens = Math.min(ratePerSecond, bucket.tokens + (elapsed * ratePerSecond) / 1000)
    bucket.at = Math.max(bucket.at, now)
    buckets.set(phoneNumberId, bucket)
    const left = lane === "bulk" && contention.contended(phoneNumberId, now) ? BULK_YIELD * ratePerSecond : 0
    if (bucket.tokens >= 1 + left) {
      bucket.tokens -= 1
      return undefined
    }
    if (lane === "first") contention.refused(phoneNumberId, now)
    return tooMany(phoneNumberId, ratePerSecond, (1 + left - bucket.tokens) / ratePerSecond)
  }
  return Pacing.of({ takeAt })
}

/** Pacing at each number's live throughput (its level known by Throughput, shared with the queue). */
export const PacingLive = Layer.effect(
  Pacing,
  Effect.gen(function*() {
    const throughput = yield* Throughput
    const sql = yield* SqlClient.SqlClient
    if (!isPostgres(sql)) return makePacing(throughput.rateNow)
    const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
    return Pacing.of(makeSharedPacing(throughput.rateNow, (asks) => runPromise(grantQuery(sql, asks))))
  })
).pipe(Layer.provide(Throughput.Default))

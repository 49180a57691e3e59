/**
 * What every pacing shares, in memory (one process) or from the fleet's budget (Pacing.ts,
 * SharedPacing.ts): the answer of a take, the lanes and how bulk sends yield, the 429.
 */
import { TooManyRequests } from "../Domain/Errors.js"

/** What a take answers: nothing (go on), or the 429 saying when a send is free again. */
export type Paced = TooManyRequests | undefined

/**
 * Who takes: a synchronous or transactional send (`first`), or a bulk queued send, which takes only
 * capacity the others leave idle: while one of them was refused within CONTENTION_MS, bulk leaves half
 * of the number's budget to them (BULK_YIELD).
 */
export type Lane = "first" | "bulk"

/**
 * Takes one send from the number's budget at `now` (epoch ms): undefined, or the 429 saying when one
 * is free again; on PostgreSQL a promise of that when the fleet's shared budget must be asked.
 */
export type TakeAt = (phoneNumberId: string, now: number, lane?: Lane) => Paced | Promise<Paced>

/** A number's rate now (messages per second). */
export type RateOf = (phoneNumberId: string) => number

export const tooMany = (phoneNumberId: string, ratePerSecond: number, retryAfterSeconds: number) =>
  new TooManyRequests({
    message:
      `Too many sends from phone number ${phoneNumberId}: the hub paces each number at ${ratePerSecond} messages per second`,
    error: "rate_limited",
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterSeconds))
  })

/** How long after another send of the number was refused bulk sends yield to the others. */
const CONTENTION_MS = 1_000
/** The share of a number's budget bulk sends leave to the others while they contend. */
export const BULK_YIELD = 0.5

/** Remembers when a send of each number was refused, for bulk sends to yield (see Lane). */
export const makeContention = () => {
  const refusedAt = new Map<string, number>()
  return {
    refused: (phoneNumberId: string, now: number) => refusedAt.set(phoneNumberId, now),
    contended: (phoneNumberId: string, now: number) => now - (refusedAt.get(phoneNumberId) ?? -Infinity) < CONTENTION_MS
  }
}

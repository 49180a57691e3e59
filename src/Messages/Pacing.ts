/**
 * Per phone number pacing of sends, at the number's live throughput (PhoneNumbers/Throughput.ts: Meta's
 * level, 80/s standard, capped by HUB_SEND_RATE when set): at most that many sends a second per
 * phone_number_id, with bursts up to one second's worth. Over the limit a synchronous send is answered
 * 429 with Retry-After instead of letting the upstream throttle the number; a queued send waits its turn.
 *
 * - SQLite (one process): a token bucket per number in memory, as before.
 * - PostgreSQL (a fleet of replicas): the budget is shared, so the rate holds for the fleet, not per
 *   replica. Each number's budget is one row of send_pacing holding its theoretical arrival time
 *   (GCRA: the budget is spent up to that instant; a burst may run it at most one second ahead of
 *   now, by the database's clock). A replica takes a slice of it with one statement (at most 1/20 of
 *   a second's sends, sized to its own recent sends of the number) and spends it from memory for at
 *   most that twentieth of a second; what it leaves unspent is given back with its next ask. Sends
 *   that find the slice spent wait together for the next one. Cost: one statement (an upsert of one
 *   row, and its commit) per slice, not per send: at 80/s, one every 4 sends of a busy number at
 *   best. The fleet never hands out more than the budget; it can exceed the rate only by slices given
 *   back after they expired unspent, at most one slice (5 % of the rate) per replica.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Runtime } from "effect"
import { TooManyRequests } from "../Domain/Errors.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { isPostgres } from "../Sql/Dialect.js"

interface Bucket {
  tokens: number
  at: number
}

/** What a take answers: nothing (go on), or the 429 saying when a send is free again. */
export type Paced = TooManyRequests | undefined

export class Pacing extends Context.Tag("Pacing")<Pacing, {
  /**
   * Takes one send from the number's budget at `now` (epoch ms): undefined, or the 429 saying when
   * one is free again. Plain, for the send core (see Send.ts), which passes its Clock's time; on
   * PostgreSQL a promise of that when the replica's slice is spent and the shared budget is asked.
   */
  readonly takeAt: (phoneNumberId: string, now: number, lane?: Lane) => Paced | Promise<Paced>
}>() {}

const tooMany = (phoneNumberId: string, ratePerSecond: number, retryAfterSeconds: number) =>
  new TooManyRequests({
    message:
      `Too many sends from phone number ${phoneNumberId}: the hub paces each number at ${ratePerSecond} messages per second`,
    error: "rate_limited",
    retryAfterSeconds: Math.max(1, Math.ceil(retryAfterSeconds))
  })

/**
 * Who takes: a synchronous or transactional send (`first`), or a bulk queued send, which takes only
 * capacity the others leave idle: while one of them was refused within CONTENTION_MS, bulk leaves half
 * of the number's budget to them (BULK_YIELD).
 */
export type Lane = "first" | "bulk"

/** How long after another send of the number was refused bulk sends yield to the others. */
const CONTENTION_MS = 1_000
/** The share of a number's budget bulk sends leave to the others while they contend. */
const BULK_YIELD = 0.5

/** Remembers when a send of each number was refused, for bulk sends to yield (see Lane). */
const makeContention = () => {
  const refusedAt = new Map<string, number>()
  return {
    refused: (phoneNumberId: string, now: number) => refusedAt.set(phoneNumberId, now),
    contended: (phoneNumberId: string, now: number) => now - (refusedAt.get(phoneNumberId) ?? -Infinity) < CONTENTION_MS
  }
}

/** A number's rate now (messages per second). */
type RateOf = (phoneNumberId: string) => number

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

/** Slices per second of a number's budget that a replica takes at once (see the top of this file). */
const SLICES_PER_SECOND = 20

/** A grant of the shared budget: `tat_ms` after it, and how many sends it gave (0: none left now). */
interface Grant {
  readonly tat_ms: number
  readonly granted: number
  readonly now_ms: number
}

/**
 * Takes up to `want` sends of the number's shared budget, as one statement, after giving back
 * `giveBack` sends of the replica's previous slice that were never made: the theoretical arrival time
 * moves on by what is granted, never more than one second (the burst) past now.
 */
const grantQuery = (
  sql: SqlClient.SqlClient,
  phoneNumberId: string,
  want: number,
  giveBack: number,
  ratePerSecond: number
) => {
  const interval = 1000 / ratePerSecond
  // The database's clock, shared by every replica.
  const now = sql.literal("(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)")
  const base = sql`GREATEST(p.tat_ms - ${giveBack * interval}, ${now})`
  const fits = sql`GREATEST(0, LEAST(${want}, FLOOR((${now} + 1000 - ${base}) / ${interval})))`
  return sql<Grant>`INSERT INTO send_pacing AS p (phone_number_id, tat_ms, last_grant)
      VALUES (${phoneNumberId}, ${now} + ${want * interval}, ${want})
    ON CONFLICT (phone_number_id) DO UPDATE SET last_grant = ${fits}, tat_ms = ${base} + ${fits} * ${interval}
    RETURNING CAST(tat_ms AS DOUBLE PRECISION) AS tat_ms, last_grant AS granted, CAST(${now} AS DOUBLE PRECISION) AS now_ms`
}

/** A replica's slice of one number's budget. */
interface Slice {
  /** Sends left in it. */
  left: number
  /** Until when it may be spent (local clock). */
  until: number
  /** How many it held, and how many of them were made. */
  size: number
  used: number
  /** The ask for the next slice, under way. */
  asking: Promise<Paced> | undefined
}

/**
 * Pacing from the budget all replicas share (PostgreSQL). A slice is sized to the replica's own
 * recent sends of the number (twice what it used when it ran out, what it used plus one when it did
 * not, at most 1/20 of a second's budget), and what a slice leaves unspent is given back with the next
 * ask: a replica never holds budget another needs for long, and N replicas sending a number below
 * its rate between them are not refused for budget none of them used.
 */
const makeSharedPacing = (
  rateOf: RateOf,
  grant: (phoneNumberId: string, want: number, giveBack: number, ratePerSecond: number) => Promise<Grant>
): Pacing["Type"] => {
  const sliceMs = 1000 / SLICES_PER_SECOND
  const slices = new Map<string, Slice>()

  const ask = (phoneNumberId: string, slice: Slice): Promise<Paced> => {
    const ratePerSecond = rateOf(phoneNumberId)
    const sliceMax = Math.max(1, Math.ceil(ratePerSecond / SLICES_PER_SECOND))
    const ranOut = slice.used >= slice.size
    const want = Math.min(sliceMax, Math.max(1, ranOut ? 2 * slice.used : slice.used + 1))
    const giveBack = slice.left
    slice.left = 0
    return grant(phoneNumberId, want, giveBack, ratePerSecond).then(
      (granted) => {
        slice.asking = undefined
        slice.size = granted.granted
        slice.used = 0
        if (granted.granted < 1) {
          // The budget is spent up to tat_ms, at most a second ahead: one send is free once now reaches tat_ms - 1 s + one interval.
          return tooMany(
            phoneNumberId,
            ratePerSecond,
            (granted.tat_ms - 1000 + 1000 / ratePerSecond - granted.now_ms) / 1000
          )
        }
        slice.left = granted.granted - 1
        slice.used = 1
        slice.until = Date.now() + sliceMs
        return undefined
      },
      () => {
        // The shared budget could not be read (the database is unreachable): the send goes on, and
        // its record's write, next, finds the database in whatever state it is and answers for it.
        slice.asking = undefined
        return undefined
      }
    )
  }

  const contention = makeContention()
  const takeAt = (phoneNumberId: string, _now: number, lane: Lane = "first"): Paced | Promise<Paced> => {
    const nowMs = Date.now()
    const slice = slices.get(phoneNumberId) ?? { left: 0, until: 0, size: 0, used: 0, asking: undefined }
    slices.set(phoneNumberId, slice)
    // While the others contend, bulk takes only from the first half of this replica's slice.
    const kept = lane === "bulk" && contention.contended(phoneNumberId, nowMs) ? Math.ceil(slice.size * BULK_YIELD) : 0
    if (slice.left > kept && nowMs < slice.until) {
      slice.left--
      slice.used++
      return undefined
    }
    if (lane === "bulk" && kept > 0 && slice.left > 0 && nowMs < slice.until) {
      return tooMany(phoneNumberId, rateOf(phoneNumberId), 1 / rateOf(phoneNumberId))
    }
    // Sends that find the slice spent while one is asked for wait for it, then take from it in turn.
    // A refusal of the others is remembered, for bulk sends to yield to them.
    const noted = (paced: Paced) => {
      if (paced !== undefined && lane === "first") contention.refused(phoneNumberId, Date.now())
      return paced
    }
    const pending = slice.asking
    if (pending !== undefined) {
      return pending.then((refused) => refused ?? takeAt(phoneNumberId, Date.now(), lane)).then(noted)
    }
    const asking = ask(phoneNumberId, slice).then(noted)
    slice.asking = asking
    return asking
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
    return makeSharedPacing(
      throughput.rateNow,
      (phoneNumberId, want, giveBack, ratePerSecond) =>
        runPromise(
          grantQuery(sql, phoneNumberId, want, giveBack, ratePerSecond).pipe(
            Effect.flatMap((rows) =>
              rows[0] === undefined ? Effect.dieMessage("the pacing upsert returned no row") : Effect.succeed(rows[0])
            )
          )
        )
    )
  })
).pipe(Layer.provide(Throughput.Default))

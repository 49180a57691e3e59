/**
 * Pacing from the budget all replicas share (PostgreSQL). Each number's budget is one row of
 * send_pacing holding its theoretical arrival time (GCRA: the budget is spent up to that instant; a
 * burst may run it at most one second ahead of now, by the database's clock). A replica takes slices
 * of it and spends them from memory, each only within the epoch it was granted in (a twentieth of a
 * second of the replica's clock, the same epochs for every number); what a slice leaves unspent is
 * given back with the next ask.
 *
 * Asks go in one statement for every number that asks at once (a multi-row upsert, one at a time per
 * replica; those made meanwhile go in the next). When an epoch ends, the first take of the next renews,
 * in one statement, the slice of every number that sent at least twice in it (sized to what it sent)
 * and gives back what the others left: a busy replica writes the budget about 20 times a second
 * whatever its numbers, where it wrote once per number and slice (0.2 statements a send in the
 * benchmark, each its own commit). A refused number is refused from memory until the budget frees a
 * send, for an epoch at most, not asked again for every send of a flood. send_pacing is UNLOGGED
 * (migration 0030): no WAL, no flush per ask; after a crash of PostgreSQL (not a restart) every
 * budget starts full.
 *
 * The fleet never hands out more than the budget. A slice is spent at most one epoch after its grant,
 * so in any second a number's sends exceed what the rate allows by at most one slice (1/20 of a
 * second's sends) per replica; leftovers are given back only from the epoch that just ended (older
 * ones are dropped, never given back late).
 */
import type { SqlClient } from "@effect/sql"
import { BULK_YIELD, type Lane, makeContention, type Paced, type RateOf, type TakeAt, tooMany } from "./PacingRules.js"

/** Epochs per second: the largest slice is one epoch of the number's budget. */
const SLICES_PER_SECOND = 20
const EPOCH_MS = 1000 / SLICES_PER_SECOND

/** One number's ask: sends wanted (0: only giving back), sends of its last slice never made, at its rate. */
interface Ask {
  readonly phoneNumberId: string
  readonly want: number
  readonly giveBack: number
  readonly ratePerSecond: number
}

/** A grant: the number's `tat_ms` after it, how many sends it gave (0: none left now), the database's clock. */
interface Grant {
  readonly phone_number_id: string
  readonly tat_ms: number
  readonly granted: number
  readonly now_ms: number
}

/**
 * Grants a group of asks (one per number) as one statement: each number's theoretical arrival time
 * moves on by what is granted after what is given back, never more than one second (the burst) past
 * now. Rows are upserted in number order, so that replicas asking at once cannot deadlock.
 */
export const grantQuery = (sql: SqlClient.SqlClient, asks: ReadonlyArray<Ask>) =>
  sql<Grant>`WITH asked AS (
      SELECT * FROM json_to_recordset(${
    JSON.stringify(asks.map((a) => ({
      id: a.phoneNumberId,
      want: a.want,
      back: (a.giveBack * 1000) / a.ratePerSecond,
      iv: 1000 / a.ratePerSecond
    })))
  }::json) AS a(id TEXT, want INTEGER, back DOUBLE PRECISION, iv DOUBLE PRECISION)
    ), clock AS (SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS DOUBLE PRECISION) AS now_ms)
    INSERT INTO send_pacing AS p (phone_number_id, tat_ms, last_grant)
      SELECT a.id, c.now_ms + a.want * a.iv, a.want FROM asked a, clock c ORDER BY a.id
    ON CONFLICT (phone_number_id) DO UPDATE SET (last_grant, tat_ms) = (
      SELECT g.fits, g.base + g.fits * a.iv
        FROM asked a, clock c,
          LATERAL (SELECT GREATEST(p.tat_ms - a.back, c.now_ms) AS base) b,
          LATERAL (SELECT b.base, GREATEST(0, LEAST(a.want, FLOOR((c.now_ms + 1000 - b.base) / a.iv))) AS fits) g
        WHERE a.id = EXCLUDED.phone_number_id)
    RETURNING p.phone_number_id, CAST(p.tat_ms AS DOUBLE PRECISION) AS tat_ms, p.last_grant AS granted,
      (SELECT now_ms FROM clock) AS now_ms`

/** Grants asks, one per number (grantQuery, run). */
type GrantAll = (asks: ReadonlyArray<Ask>) => Promise<ReadonlyArray<Grant>>

/**
 * Asks in groups, one statement at a time: those made while one runs go together in the next. Each
 * ask's promise never fails: undefined when the statement did.
 */
const makeAsker = (grantAll: GrantAll) => {
  let queued = new Map<string, { readonly ask: Ask; readonly settle: (grant: Grant | undefined) => void }>()
  let running = false
  const flush = () => {
    if (running || queued.size === 0) return
    const group = queued
    queued = new Map()
    running = true
    grantAll([...group.values()].map((q) => q.ask)).then(
      (grants) => {
        const byNumber = new Map(grants.map((g) => [g.phone_number_id, g]))
        for (const [phoneNumberId, q] of group) q.settle(byNumber.get(phoneNumberId))
      },
      () => {
        for (const q of group.values()) q.settle(undefined)
      }
    ).finally(() => {
      running = false
      flush()
    })
  }
  return (ask: Ask) =>
    new Promise<Grant | undefined>((settle) => {
      queued.set(ask.phoneNumberId, { ask, settle })
      // Asks made in the same turn go together.
      if (!running) queueMicrotask(flush)
    })
}

/** A replica's slice of one number's budget. */
interface Slice {
  /** Sends left in it, spendable in `epoch` only. */
  left: number
  epoch: number
  /** How many it held, and how many of them were made. */
  size: number
  used: number
  /** Sends of the number made in `epoch`, from this slice and the ones before it in the epoch. */
  sent: number
  /**
   * When (local clock) the shared budget frees a send, as the last refusal said, and until when this
   * replica refuses without asking again: that instant, or the end of an epoch, whichever is first
   * (budget given back or released meanwhile is seen within an epoch).
   */
  freeAt: number
  refusedUntil: number
  /**
   * The ask for the next slice, under way: what the sends that wait for it do then (take from the
   * slice, go on without pacing when the database was not reached, or the 429).
   */
  asking: Promise<"take" | Paced> | undefined
}

/**
 * Pacing from the budget all replicas share (see the top of this file). A slice is sized to the
 * replica's own recent sends of the number (twice what it used when it ran out, what it used plus
 * one when it did not, at most one epoch of the budget): a replica never holds budget another needs
 * for long, and N replicas sending a number below its rate between them are not refused for budget
 * none of them used.
 */
export const makeSharedPacing = (rateOf: RateOf, grantAll: GrantAll): { readonly takeAt: TakeAt } => {
  const slices = new Map<string, Slice>()
  const contention = makeContention()
  const asker = makeAsker(grantAll)
  /** The numbers granted a slice in `activeEpoch`, renewed together when it ends. */
  let active = new Set<string>()
  let activeEpoch = -1

  const sliceMax = (phoneNumberId: string) => Math.max(1, Math.ceil(rateOf(phoneNumberId) / SLICES_PER_SECOND))
  const sized = (phoneNumberId: string, slice: Slice) =>
    Math.min(sliceMax(phoneNumberId), Math.max(1, slice.used >= slice.size ? 2 * slice.used : slice.used + 1))

  const ask = (phoneNumberId: string, slice: Slice, want: number, epoch: number) => {
    const ratePerSecond = rateOf(phoneNumberId)
    // What the slice of the epoch just ended left unspent goes back; older leftovers are dropped.
    const giveBack = slice.epoch >= epoch - 1 ? slice.left : 0
    slice.left = 0
    const asking = asker({ phoneNumberId, want, giveBack, ratePerSecond }).then((grant) => {
      // Read while this ask is still under way, so that a renewal of the epoch just ended passes this slice by.
      const now = epochNow()
      slice.asking = undefined
      // The shared budget could not be read (the database is unreachable): the sends go on, and their
      // records' writes, next, find the database in whatever state it is and answer for it.
      if (grant === undefined) return undefined
      if (slice.epoch !== now) slice.sent = 0
      slice.epoch = now
      slice.size = slice.left = grant.granted
      slice.used = 0
      active.add(phoneNumberId)
      if (grant.granted >= 1 || want === 0) return "take" as const
      // The budget is spent up to tat_ms, at most a second ahead: one send is free once now reaches
      // tat_ms - 1 s + one interval. Until then (an epoch at most) this replica refuses without asking:
      // a statement per refused send otherwise, in a flood over the rate.
      const freeInMs = Math.max(0, grant.tat_ms - 1000 + 1000 / ratePerSecond - grant.now_ms)
      slice.freeAt = Date.now() + freeInMs
      slice.refusedUntil = Date.now() + Math.min(freeInMs, EPOCH_MS)
      return tooMany(phoneNumberId, ratePerSecond, freeInMs / 1000)
    })
    slice.asking = asking
    return asking
  }

  /** The current epoch; the first call in a new one renews the slices of the epoch just ended. */
  const epochNow = () => {
    const epoch = Math.floor(Date.now() / EPOCH_MS)
    if (epoch === activeEpoch) return epoch
    const ended = activeEpoch === epoch - 1 ? active : new Set<string>()
    active = new Set()
    activeEpoch = epoch
    for (const phoneNumberId of ended) {
      const slice = slices.get(phoneNumberId)
      if (slice === undefined || slice.asking !== undefined || slice.epoch !== epoch - 1) continue
      // Sized to what the number sent in the epoch; one that sent once or not at all asks again when it
      // sends, and only gives back.
      const want = slice.sent >= 2 ? Math.min(sliceMax(phoneNumberId), slice.sent + 1) : 0
      if (want > 0 || slice.left > 0) void ask(phoneNumberId, slice, want, epoch)
    }
    return epoch
  }

  const takeAt = (phoneNumberId: string, _now: number, lane: Lane = "first"): Paced | Promise<Paced> => {
    const epoch = epochNow()
    const slice = slices.get(phoneNumberId) ??
      { left: 0, epoch: -1, size: 0, used: 0, sent: 0, freeAt: 0, refusedUntil: 0, asking: undefined }
    slices.set(phoneNumberId, slice)
    const current = slice.epoch === epoch
    // While the others contend, bulk takes only from the first half of this replica's slice.
    const kept = lane === "bulk" && contention.contended(phoneNumberId, Date.now())
      ? Math.ceil(slice.size * BULK_YIELD)
      : 0
    if (current && slice.left > kept) {
      slice.left--
      slice.used++
      slice.sent++
      return undefined
    }
    if (current && kept > 0 && slice.left > 0) {
      return tooMany(phoneNumberId, rateOf(phoneNumberId), 1 / rateOf(phoneNumberId))
    }
    const now = Date.now()
    if (now < slice.refusedUntil && slice.asking === undefined) {
      if (lane === "first") contention.refused(phoneNumberId, now)
      return tooMany(phoneNumberId, rateOf(phoneNumberId), (slice.freeAt - now) / 1000)
    }
    // Sends that find the slice spent wait for the next one (asked now, or already under way), then
    // take from it in turn. A refusal of the others is remembered, for bulk sends to yield to them.
    const asking = slice.asking ?? ask(phoneNumberId, slice, sized(phoneNumberId, slice), epoch)
    return asking.then((next) => (next === "take" ? takeAt(phoneNumberId, Date.now(), lane) : next)).then((paced) => {
      if (paced !== undefined && lane === "first") contention.refused(phoneNumberId, Date.now())
      return paced
    })
  }
  return { takeAt }
}

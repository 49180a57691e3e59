/**
 * Read this first: the queue's drainer, one per replica, all draining the same `send_queue`.
 *
 * A round (`drainRound`): leases that a lost replica left are recovered, sends whose validity ended are
 * given up, then each number with sends due gets a lease of what fits its next quarter second of
 * throughput, all in one transaction (transactional first, per person in order and within Meta's pair
 * rate: SendQueue/Repo.ts `lease`). Each leased send then runs as plain async code
 * (SendQueue/LeasedSends.ts): its turn in the number's pace, `sending`, the Graph call, its outcome
 * (SendQueue/Outcomes.ts). A send whose Graph call began is never made again: if its replica dies,
 * the lease runs out and the send ends `outcome_unknown`.
 *
 * Rounds run when a send is queued or one ends here (the signal), and otherwise when the next queued
 * send falls due, at least every POLL (other replicas' sends, leases to recover), and at most every
 * ROUND_GAP_MS.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Fiber, FiberSet, Queue, Runtime, SubscriptionRef } from "effect"
import { hostname } from "node:os"
import { HubConfig } from "../Config.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { type InFlightGate, makeInFlightGate } from "../Messages/InFlightGate.js"
import { Pacing, PacingLive } from "../Messages/Pacing.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Metrics } from "../Metrics/Metrics.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { isPostgres } from "../Sql/Dialect.js"
import { Upstream } from "../Upstream/Upstream.js"
import { instanceOf, type LeasedSendContext, makeTurns, sendLeased } from "./LeasedSends.js"
import { makeLevelWindows } from "./LevelWindows.js"
import { giveUp, parsedBody, refOf, settleLost } from "./Outcomes.js"
import { QueueEvents } from "./QueueEvents.js"
import type { DueLanes } from "./QueueReads.js"
import { type LaneLease, type QueuedRow, SendQueueRepo } from "./Repo.js"
import { PAIR_BURST, PAIR_INTERVAL_MS } from "./Rules.js"

/** How often a round runs when nothing signals: other replicas' sends, leases to recover. */
const POLL = Duration.seconds(1)
/** Each lease takes what a number can send in this long: a transactional send waits at most about that behind bulk. */
const LEASE_WINDOW_MS = 250
/** How long a lease holds before another replica may take the send (or, once sending, call it lost). */
const LEASE_MS = 60_000
/**
 * Rounds begin at most this often. A lane leases once half its window is free (`laneRequests`), so a
 * round every 50 ms keeps each lane fed; a round for each send ended (each wakes the drainer) cost a
 * round's statements a send.
 */
const ROUND_GAP_MS = 50
/** Sends of the queue a replica holds at once (leased, waiting their turn or in their Graph call), of all numbers. */
const MAX_HELD = 2_048

/** A replica's drainer: its services and its state (what it holds, its signal, its sends under way). */
interface Drainage extends LeasedSendContext {
  readonly signal: Queue.Queue<void>
  /**
   * The sends leased here and not yet ended, counted (at most MAX_HELD); the layer's end waits for them
   * (what waits for its turn is given back at once).
   */
  readonly underway: InFlightGate<void>
  /** The numbers' levels read in the background, closed with the layer. */
  readonly refreshing: FiberSet.FiberSet
  /**
   * The same, per number and lane (`heldKey`): each lane's next lease takes only
   * what is left of its window, so bulk sends under way never leave a transactional one without a place.
   */
  readonly heldOf: Map<string, number>
  /** When the round last swept (`sweep`). */
  readonly sweptAt: { at: number }
  /** Counts a queued send ended here (tests wait on the count). */
  readonly counted: () => void
}

const wake = (d: Drainage) => d.signal.unsafeOffer(undefined)

const heldKey = (phoneNumberId: string, priority: number) => `${priority} ${phoneNumberId}`

const held = (d: Drainage, phoneNumberId: string, priority: number) =>
  d.heldOf.get(heldKey(phoneNumberId, priority)) ?? 0

const hold = (d: Drainage, rows: ReadonlyArray<QueuedRow>) => {
  for (const row of rows) {
    const key = heldKey(row.phone_number_id, row.priority)
    d.heldOf.set(key, (d.heldOf.get(key) ?? 0) + 1)
  }
}

const release = (d: Drainage, row: QueuedRow) => {
  const key = heldKey(row.phone_number_id, row.priority)
  const left = (d.heldOf.get(key) ?? 1) - 1
  if (left > 0) d.heldOf.set(key, left)
  else d.heldOf.delete(key)
}

/** A leased send ended (made, retried later, given up or given back): its lane has room again. */
const ended = (d: Drainage, row: QueuedRow) => {
  release(d, row)
  wake(d)
  d.counted()
}

/**
 * What a number's lanes may lease in this round: each lane has its own window (what the number sends
 * in LEASE_WINDOW_MS), so a transactional send is leased whatever the number's bulk sends hold (they
 * yield to it in the pacing) and a reply never waits for a bulk lease to end. A lane leases once half
 * its window or more is free, not for each send ended: a lease a send was a statement a send.
 */
const laneRequests = (
  d: Drainage,
  { phoneNumberId, priorities }: DueLanes,
  at: number,
  free: { held: number }
): ReadonlyArray<LaneLease> => {
  const window = Math.max(1, Math.ceil((d.throughput.rateNow(phoneNumberId) * LEASE_WINDOW_MS) / 1000))
  return priorities.flatMap((priority) => {
    const room = Math.min(window - held(d, phoneNumberId, priority), free.held)
    if (room < Math.ceil(window / 2)) return []
    free.held -= room
    return [{
      phoneNumberId,
      priority,
      limit: room,
      now: at,
      owner: d.owner,
      leaseUntil: at + LEASE_MS,
      pairBurstMs: (PAIR_BURST - 1) * PAIR_INTERVAL_MS
    }]
  })
}

/** Holds the leased rows and starts each send, without a fiber (SendQueue/LeasedSends.ts). */
const startLeased = (d: Drainage, rows: ReadonlyArray<QueuedRow>) =>
  Effect.gen(function*() {
    if (rows[0] === undefined) return
    hold(d, rows)
    // The number's live level, read when first used and hourly (in the background: the lease goes on at the known rate).
    yield* FiberSet.run(d.refreshing, d.throughput.refresh(instanceOf(rows[0])))
    for (const row of rows) {
      void d.underway.run(row.organization_id, () => sendLeased(d, row)).finally(() => ended(d, row))
    }
  })

/** Lost leases and ended validities settled, each taken off the queue as it is read. */
const sweep = (d: Drainage, at: number) =>
  Effect.gen(function*() {
    for (const lost of yield* d.repo.recoverLeases(at)) {
      yield* settleLost(d, lost)
      d.counted()
    }
    for (const expired of yield* d.repo.takeExpired(at)) {
      const error = expired.last_error === null ? undefined : parsedBody(expired.last_error)
      yield* giveUp(d, refOf(expired), "expired", error)
      d.counted()
    }
    yield* d.repo.pruneSendSeconds(at)
  })

/**
 * One round: at most once a POLL the sweep (leases run out and validities end on the clock, not with each
 * send settled, which wakes a round), then each due number drained.
 */
const drainRound = (d: Drainage) =>
  Effect.gen(function*() {
    const at = d.now()
    if (at - d.sweptAt.at >= Duration.toMillis(POLL)) {
      d.sweptAt.at = at
      yield* sweep(d, at)
    }
    const free = { held: MAX_HELD - d.underway.inFlight() }
    const requests = (yield* d.repo.dueLanes(at)).flatMap((lanes) => laneRequests(d, lanes, at, free))
    for (const rows of yield* d.repo.leaseLanes(requests)) yield* startLeased(d, rows)
  })

/**
 * Until the next round: a signal, or the soonest queued send falling due (at most POLL); and at least
 * ROUND_GAP_MS after the round that `began`.
 */
const untilNextRound = (d: Drainage, began: number) =>
  Effect.gen(function*() {
    const next = yield* Effect.orElseSucceed(d.repo.nextDueAt, () => undefined)
    const delay = next === undefined
      ? Duration.toMillis(POLL)
      : Math.min(Duration.toMillis(POLL), Math.max(0, next - d.now()))
    yield* Effect.raceFirst(Queue.take(d.signal), Effect.sleep(Duration.millis(delay)))
    const gap = began + ROUND_GAP_MS - d.now()
    if (gap > 0) yield* Effect.sleep(Duration.millis(gap))
  })

const drainForever = (d: Drainage) =>
  Effect.forever(
    Effect.suspend(() => {
      const began = d.now()
      return Effect.zipRight(
        drainRound(d).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("A round of the send queue failed", cause))
        ),
        untilNextRound(d, began)
      )
    })
  )

/**
 * Counts sends ended into `settled`, the changes of one turn of the event loop told at once: a
 * SubscriptionRef's update for each send cost 4.6 % of the drain's CPU (a profile of the queue scenario).
 */
const countedInto = (settled: SubscriptionRef.SubscriptionRef<number>, runSync: <A>(effect: Effect.Effect<A>) => A) => {
  let count = 0
  let pending = false
  return () => {
    count++
    if (pending) return
    pending = true
    setImmediate(() => {
      pending = false
      runSync(SubscriptionRef.set(settled, count))
    })
  }
}

export class SendQueueDrainer extends Effect.Service<SendQueueDrainer>()("SendQueueDrainer", {
  scoped: Effect.gen(function*() {
    const clock = yield* Effect.clock
    const { graphTimeout } = yield* HubConfig
    const settled = yield* SubscriptionRef.make(0)
    const run = Runtime.runPromise(yield* Effect.runtime<never>())
    const d: Drainage = {
      repo: yield* SendQueueRepo,
      messages: yield* MessagesRepo,
      queueEvents: yield* QueueEvents,
      metrics: yield* Metrics,
      now: () => clock.unsafeCurrentTimeMillis(),
      upstream: yield* Upstream,
      access: yield* InstanceAccess,
      pacing: yield* Pacing,
      throughput: yield* Throughput,
      owner: `${hostname()}:${process.pid}:${crypto.randomUUID()}`,
      sendingLeaseMs: Math.max(LEASE_MS, Duration.toMillis(graphTimeout) + LEASE_MS / 2),
      signal: yield* Queue.sliding<void>(1),
      run,
      turns: makeTurns(),
      underway: makeInFlightGate({ total: MAX_HELD, perOrganization: MAX_HELD }, () => {}),
      refreshing: yield* FiberSet.make(),
      heldOf: new Map(),
      slots: new Map(),
      levels: makeLevelWindows(() => clock.unsafeCurrentTimeMillis()),
      sweptAt: { at: -Infinity },
      counted: countedInto(settled, Runtime.runSync(yield* Effect.runtime<never>()))
    }
    // On SQLite this process is the only one serving the database: what an earlier run held is lost at once.
    if (!isPostgres(yield* SqlClient.SqlClient)) {
      for (const lost of yield* Effect.orDie(d.repo.recoverLeases(Number.MAX_SAFE_INTEGER))) yield* settleLost(d, lost)
    }
    // The gauges name the numbers with sends queued (a number that only sent lately has no queue to show).
    yield* d.metrics.queueAtScrape(
      Effect.orDie(
        Effect.suspend(() =>
          Effect.map(d.repo.readings(d.now()), (readings) => readings.filter((reading) => reading.depth > 0))
        )
      )
    )
    const fiber = yield* Effect.forkScoped(drainForever(d))
    // The rounds stop, sends waiting for their turn are given back, and those begun run to their end.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(
        Effect.zipRight(Fiber.interrupt(fiber), Effect.sync(() => d.turns.stop())),
        d.underway.drained
      )
    )
    return {
      /** Wakes the drainer: a send was queued. */
      wake: () => wake(d),
      /** How many queued sends ended here (made, retried later or given up), then each change: tests wait on it. */
      settled: settled.changes,
      /** Sends this replica holds and has not ended (tests wait for none). */
      inFlight: d.underway.inFlight
    } as const
  }),
  dependencies: [
    SendQueueRepo.Default,
    Throughput.Default,
    QueueEvents.Default,
    MessagesRepo.Default,
    PacingLive,
    InstanceAccess.Default
  ]
}) {}

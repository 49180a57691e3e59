/**
 * Read this first: the queue's drainer, one per replica, all draining the same `send_queue`.
 *
 * A round (`drainRound`): leases that a lost replica left are recovered, sends whose validity ended are
 * given up, then each number with sends due gets a lease of what fits its next quarter second of
 * throughput, all in one transaction (transactional first, per person in order and within Meta's pair
 * rate: SendQueue/Repo.ts `lease`). Each leased send (`sendQueued`) waits for its place in the
 * number's pacing (the budget synchronous sends take from too: Messages/Pacing.ts), is marked
 * `sending` (in a group commit: SendQueue/Repo.ts `claimWriter`), and goes to the Graph; its outcome
 * (`settle`, SendQueue/Outcomes.ts) is the record accepted, a retry after the backoff, or the record
 * failed with its reason (SendQueue/Rules.ts says which), told in a group commit too
 * (SendQueue/QueueEvents.ts). A send whose Graph call began is never made again: if its replica dies,
 * the lease runs out and the send ends `outcome_unknown`.
 *
 * Rounds run when a send is queued or one ends here (the signal), and otherwise when the next queued
 * send falls due, at least every POLL (other replicas' sends, leases to recover), and at most every
 * ROUND_GAP_MS.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Duration, Effect, Either, Fiber, FiberSet, Queue, SubscriptionRef } from "effect"
import { hostname } from "node:os"
import { HubConfig } from "../Config.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { Pacing, PacingLive } from "../Messages/Pacing.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Metrics } from "../Metrics/Metrics.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { isPostgres } from "../Sql/Dialect.js"
import { untilStored } from "../Sql/Unavailable.js"
import { type SendEndpoint, sendEndpoints, Upstream } from "../Upstream/Upstream.js"
import { giveUp, type OutcomeContext, parsedBody, refOf, settle, settleLost } from "./Outcomes.js"
import { QueueEvents } from "./QueueEvents.js"
import type { DueLanes } from "./QueueReads.js"
import { type LaneLease, type QueuedRow, SendQueueRepo } from "./Repo.js"
import { PAIR_BURST, PAIR_INTERVAL_MS, priorityRank } from "./Rules.js"

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
/** Sends of the queue in flight at once, per replica (the Graph calls of all numbers). */
const MAX_IN_FLIGHT = 2_048

const isEndpoint = (text: string): text is SendEndpoint => sendEndpoints.some((endpoint) => endpoint === text)

const instanceOf = (row: QueuedRow): InstanceRef => ({
  id: row.instance_id,
  organizationId: row.organization_id,
  phoneNumberId: row.phone_number_id,
  wabaId: row.waba_id
})

/** A replica's drainer: its services and its state (what it holds, its signal, its sends under way). */
interface Drainage extends OutcomeContext {
  readonly upstream: Upstream["Type"]
  readonly access: InstanceAccess
  readonly pacing: Pacing["Type"]
  readonly throughput: Throughput
  readonly owner: string
  /** A call in flight must never look lost: the lease of a send outlasts the Graph's deadline. */
  readonly sendingLeaseMs: number
  readonly signal: Queue.Queue<void>
  readonly semaphore: Effect.Semaphore
  /** The sends under way, closed with the layer: what waits for its turn is given back, what is sending ends first. */
  readonly sending: FiberSet.FiberSet
  /**
   * Sends leased here and not yet ended, per number and lane (`heldKey`): each lane's next lease takes only
   * what is left of its window, so bulk sends under way never leave a transactional one without a place.
   */
  readonly heldOf: Map<string, number>
  /** When the round last swept (`sweep`). */
  readonly sweptAt: { at: number }
  /** Per number, when this replica's next queued send may go (`slotted`). */
  readonly slots: Map<string, number>
  /** Counts a queued send ended here (tests wait on the count). */
  readonly counted: Effect.Effect<void>
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

/**
 * The send's slot: a replica's queued sends of one number go one every 1/rate seconds, never in a burst, so
 * no one-second window holds more than the number's level (the pacing's bucket allows a second's burst, which
 * a backlog due at once would take on top of the refill: scripts/bench.ts --scenarios queue saw 161 in one
 * second at 80/s before this).
 */
const slotted = (d: Drainage, row: QueuedRow): Effect.Effect<void> =>
  Effect.suspend(() => {
    const now = d.now()
    const slot = Math.max(d.slots.get(row.phone_number_id) ?? now, now)
    d.slots.set(row.phone_number_id, slot + 1000 / d.throughput.rateNow(row.phone_number_id))
    return slot > now ? Effect.sleep(Duration.millis(slot - now)) : Effect.void
  })

/** Waits for the send's place in its number's pacing (shared with synchronous sends; bulk yields to them). */
const paced = (d: Drainage, row: QueuedRow): Effect.Effect<void> =>
  Effect.suspend(() => {
    const lane = row.priority === priorityRank.bulk ? "bulk" : "first"
    const taken = d.pacing.takeAt(row.phone_number_id, d.now(), lane)
    return Effect.flatMap(
      taken instanceof Promise ? Effect.promise(() => taken) : Effect.succeed(taken),
      (refused) =>
        refused === undefined
          ? Effect.void
          : Effect.zipRight(
            Effect.sleep(Duration.millis(1000 / d.throughput.rateNow(row.phone_number_id))),
            paced(d, row)
          )
    )
  })

/** A leased send whose turn came: `sending`, the Graph call, the outcome recorded. */
const sendLeased = (d: Drainage, row: QueuedRow) =>
  Effect.gen(function*() {
    if (d.now() >= row.expires_at) return yield* giveUp(d, refOf(row), "expired", undefined)
    const target = yield* Effect.either(d.access.target(instanceOf(row)))
    if (Either.isLeft(target)) {
      // The instance is gone or cannot reach Meta: a later try would fare the same.
      return yield* giveUp(d, refOf(row), "refused", { message: target.left.message })
    }
    // Cancelled while it waited its turn (or no longer this replica's): not sent, nothing to record.
    if (!(yield* d.repo.claimSending(row.message_id, d.owner, d.now() + d.sendingLeaseMs))) return
    const sentAt = d.now()
    const endpoint = isEndpoint(row.endpoint) ? row.endpoint : "messages"
    const outcome = yield* Effect.promise(() => d.upstream.sendMessage(target.right, parsedBody(row.body), endpoint))
    yield* settle(d, row, sentAt, outcome)
  })

/**
 * One leased send: its place in the pacing (a replica stopping meanwhile gives the send back to the
 * queue), then the send, which once begun runs to its end (the Graph call has its deadline).
 */
const sendQueued = (d: Drainage, row: QueuedRow) =>
  Effect.zipRight(Effect.zipRight(slotted(d, row), paced(d, row)), Effect.uninterruptible(sendLeased(d, row))).pipe(
    d.semaphore.withPermits(1),
    Effect.onInterrupt(() => Effect.ignore(d.repo.giveBack([row.message_id], d.owner))),
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(
        Effect.logError("A queued send could not be settled; given back to the queue unless its call began", {
          messageId: row.message_id,
          cause
        }),
        // Failed before its Graph call (the database failing its turn): queued again at once rather than
        // when its lease runs out. Once `sending`, giveBack leaves it: its lease decides.
        Effect.ignoreLogged(untilStored(d.repo.giveBack([row.message_id], d.owner)))
      )
    ),
    Effect.ensuring(Effect.zipRight(
      Effect.sync(() => {
        release(d, row)
        wake(d)
      }),
      d.counted
    ))
  )

/**
 * What a number's lanes may lease in this round: each lane has its own window (what the number sends
 * in LEASE_WINDOW_MS), so a transactional send is leased whatever the number's bulk sends hold (they
 * yield to it in the pacing) and a reply never waits for a bulk lease to end. A lane leases once half
 * its window or more is free, not for each send ended: a lease a send was a statement a send.
 */
const laneRequests = (
  d: Drainage,
  { phoneNumberId, priorities }: DueLanes,
  at: number
): ReadonlyArray<LaneLease> => {
  const window = Math.max(1, Math.ceil((d.throughput.rateNow(phoneNumberId) * LEASE_WINDOW_MS) / 1000))
  return priorities.flatMap((priority) => {
    const room = window - held(d, phoneNumberId, priority)
    return room >= Math.ceil(window / 2)
      ? [{
        phoneNumberId,
        priority,
        limit: room,
        now: at,
        owner: d.owner,
        leaseUntil: at + LEASE_MS,
        pairBurstMs: (PAIR_BURST - 1) * PAIR_INTERVAL_MS
      }]
      : []
  })
}

/** Holds the leased rows and starts each send. */
const startLeased = (d: Drainage, rows: ReadonlyArray<QueuedRow>) =>
  Effect.gen(function*() {
    if (rows[0] === undefined) return
    hold(d, rows)
    // The number's live level, read when first used and hourly (in the background: the lease goes on at the known rate).
    yield* FiberSet.run(d.sending, d.throughput.refresh(instanceOf(rows[0])))
    for (const row of rows) yield* FiberSet.run(d.sending, sendQueued(d, row))
  })

/** Lost leases and ended validities settled, each taken off the queue as it is read. */
const sweep = (d: Drainage, at: number) =>
  Effect.gen(function*() {
    for (const lost of yield* d.repo.recoverLeases(at)) {
      yield* settleLost(d, lost)
      yield* d.counted
    }
    for (const expired of yield* d.repo.takeExpired(at)) {
      const error = expired.last_error === null ? undefined : parsedBody(expired.last_error)
      yield* giveUp(d, refOf(expired), "expired", error)
      yield* d.counted
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
    const requests = (yield* d.repo.dueLanes(at)).flatMap((lanes) => laneRequests(d, lanes, at))
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

export class SendQueueDrainer extends Effect.Service<SendQueueDrainer>()("SendQueueDrainer", {
  scoped: Effect.gen(function*() {
    const clock = yield* Effect.clock
    const { graphTimeout } = yield* HubConfig
    const settled = yield* SubscriptionRef.make(0)
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
      semaphore: yield* Effect.makeSemaphore(MAX_IN_FLIGHT),
      sending: yield* FiberSet.make(),
      heldOf: new Map(),
      slots: new Map(),
      sweptAt: { at: -Infinity },
      counted: SubscriptionRef.update(settled, (n) => n + 1)
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
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return {
      /** Wakes the drainer: a send was queued. */
      wake: () => wake(d),
      /** How many queued sends ended here (made, retried later or given up), then each change: tests wait on it. */
      settled: settled.changes,
      /** Sends this replica holds and has not ended (tests wait for none). */
      inFlight: () => [...d.heldOf.values()].reduce((total, held) => total + held, 0)
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

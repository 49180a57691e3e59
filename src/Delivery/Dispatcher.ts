/**
 * READ THIS FIRST: the delivery engine. A delivery's path through src/Delivery/, in order:
 *  1. Enqueue.ts: in the transaction that stores an upstream event (UpstreamEvents/Ingress.ts) or a test
 *     event (Webhooks/TestEvents.ts), one pending row per active webhook that takes the event; the
 *     dispatcher's intake (Handoff.ts) is asked of each row whether it may skip the queue
 *     (Admission.ts, within the shares of Fairness.ts): if so, it is written leased to this process
 *     and started once the transaction commits. Outbox.ts holds the SQL.
 *  2. DispatchSignal.ts: queued rows wake the dispatcher (every replica's, on PostgreSQL).
 *  3. This file: a round logs finished attempts (AttemptLog.ts) and leases due rows (Lease.ts:
 *     first attempts before retries, within the shares of Fairness.ts), in one transaction. Leased
 *     and admitted rows fill up to four times the shares (Fairness.pipelineDepth), and admitted rows
 *     of a webhook whose receiver answers quickly up to 32 times (ReceiverPace.ts, HANDOFF_DEPTH);
 *     StartGate.ts starts them within the shares themselves, the rest waiting their turn in memory.
 *  4. Attempt.ts: the keys and headers (Credentials.ts, decrypted by Sql/SecretCipher.ts), the
 *     signature (Signing.ts), the address checked (Net/UrlPolicy.ts), the POST (Sender.ts), the
 *     answer classified, the retry scheduled (RetryPolicy.ts) or the delivery dead.
 *  5. The next round logs the attempt (AttemptLog.ts); DeliveryWatch.ts tells a waiting test; a 410
 *     or days of failures turn the webhook off (Webhooks/Repo.ts, deactivate).
 *  6. On shutdown what did not finish is released (Outbox.ts) for the next start; Retention.ts
 *     deletes finished rows after HUB_RETENTION; OutboxStates.ts counts the outbox for metrics.
 * What the endpoints read or change of webhooks and their deliveries is src/Webhooks/'s.
 *
 * The dispatcher: a fiber started with the server that drains the persisted outbox. New deliveries
 * that overtake nothing queued are handed to it by the ingress and start as soon as they commit
 * (Handoff.ts, Admission.ts); the rest are queued and leased by rounds. It wakes on the
 * DispatchSignal (rows queued, an attempt finished, a near retry due) and on a Schedule otherwise
 * (due retries, leases expired by a crashed process). Each round logs every finished attempt and,
 * when rows may be due, leases them (first attempts before retries) in ONE shared transaction, then
 * offers the leased rows to the start gate, which starts attempts within bounded concurrency
 * overall, per webhook and per organization; it leases ahead of that bound so that the next rows
 * are this process's while the lease commits.
 * Attempts are plain promises: no fiber or Effect timer per delivery, only the exchange over the
 * kept-alive pool. On shutdown it stops leasing, lets in-flight attempts finish for up to
 * HUB_DISPATCH_DRAIN_TIMEOUT, logs them, and releases the rest so the next start takes them at once.
 */
import { SqlClient } from "@effect/sql"
import { Deferred, Duration, Effect, Fiber, Layer, Schedule } from "effect"
import { hostname } from "node:os"
import { HubConfig } from "../Config.js"
import { Readiness } from "../Health/Readiness.js"
import { Metrics } from "../Metrics/Metrics.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import { type Admission, makeAdmission } from "./Admission.js"
import { type Deliveries, makeDeliveries } from "./Attempt.js"
import type { Credentials } from "./Credentials.js"
import { DeliveryWatch } from "./DeliveryWatch.js"
import { DispatchSignal } from "./DispatchSignal.js"
import { HANDOFF_DEPTH, pipelineDepth, pipelineShares, type Shares } from "./Fairness.js"
import { type DispatcherIntake, Handoff } from "./Handoff.js"
import type { LeaseRequest } from "./Lease.js"
import { OutboxRepo } from "./Outbox.js"
import { outboxStateQueries } from "./OutboxStates.js"
import { makeReceiverPace, type ReceiverPace } from "./ReceiverPace.js"
import type { AttemptRecord, LeasedDelivery } from "./Records.js"
import { makeStartGate, type StartGate } from "./StartGate.js"

const POLL_INTERVAL = Duration.seconds(1)

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * The dispatcher: what it works with, and its state. Only the dispatcher's fiber, the hand-off's
 * intake and the attempts' callbacks touch the state, all on the one JavaScript thread.
 */
interface Engine {
  readonly outbox: OutboxRepo
  readonly signal: DispatchSignal
  readonly batcher: WriteBatcher["Type"]
  readonly deliveries: Deliveries
  readonly watch: DeliveryWatch
  /** The room the lease and the hand-off fill: the shares, pipelineDepth times (Fairness.ts). */
  readonly shares: Shares
  /** The counts of rows in that room (leased or admitted, until their attempts end), and whether a new delivery may skip the queue. */
  readonly admission: Admission
  /** The attempts at the receivers, within the shares themselves; the rest of the room waits there. */
  readonly gate: StartGate
  /** How fast each webhook's receiver answers: a quick one's new rows may be handed over deeper (Admission.ts). */
  readonly pace: ReceiverPace
  /** This process's name on the rows it leases. */
  readonly owner: string
  readonly leaseMs: number
  /** The longest an attempt takes (HUB_WEBHOOK_TIMEOUT): one starts no later than this before its lease ends. */
  readonly timeoutMs: number
  readonly retryWake: RetryWaker
  /** Aborts the attempts still in flight when the drain time is up. */
  readonly shutdown: AbortController
  /** Done once stopping and no attempt is in flight. */
  readonly idle: Deferred.Deferred<void>
  stopping: boolean
  /** Attempts finished since the last round, waiting to be logged. */
  finished: Array<AttemptRecord>
  /** Leased rows of webhooks no longer active, to cancel. */
  inactive: Array<string>
}

const makeEngine = Effect.gen(function*() {
  const config = yield* HubConfig
  const signal = yield* DispatchSignal
  const attemptShares: Shares = {
    concurrency: config.dispatchConcurrency,
    perWebhook: config.dispatchPerWebhook,
    perOrganization: config.dispatchPerOrganization
  }
  const timeoutMs = Duration.toMillis(config.webhookTimeout)
  const marginMs = Duration.toMillis(config.dispatchLeaseMargin)
  const shares = pipelineShares(attemptShares, pipelineDepth(timeoutMs, marginMs))
  const pace = makeReceiverPace(marginMs)
  const engine: Engine = {
    outbox: yield* OutboxRepo,
    signal,
    batcher: yield* WriteBatcher,
    deliveries: yield* makeDeliveries,
    watch: yield* DeliveryWatch,
    shares,
    admission: makeAdmission(shares, { shares: pipelineShares(attemptShares, HANDOFF_DEPTH), quick: pace.quick }),
    gate: makeStartGate(attemptShares),
    pace,
    owner: `${hostname()}:${process.pid}:${crypto.randomUUID()}`,
    // A lease outlives the longest attempt (the timeout) by a margin before another process may take the row.
    leaseMs: timeoutMs + marginMs,
    timeoutMs,
    retryWake: retryWaker(signal.notify),
    shutdown: new AbortController(),
    idle: yield* Deferred.make<void>(),
    stopping: false,
    finished: [],
    inactive: []
  }
  return engine
})

/**
 * The dispatcher, started with the server: rounds run when the signal wakes them (and on a schedule),
 * the hand-off starts what the ingress admitted, and the shutdown drains and releases. The steps
 * follow in the order a delivery meets them: dispatchRound, logAndLease, startAttempt (then
 * Attempt.ts: makeHttpCall, attemptRecord), settleAttempt, afterLogging; then intakeOf and drainAndRelease.
 */
export const DispatcherLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const { dispatchDrainTimeout } = yield* HubConfig
    const handoff = yield* Handoff
    const readiness = yield* Readiness
    const engine = yield* makeEngine
    yield* reportAtScrape(engine)
    const loop = yield* Effect.forkScoped(Effect.forever(
      // A round is never cut in half: what it logged or leased is known once it returns.
      Effect.zipRight(engine.signal.wait, Effect.uninterruptible(dispatchRound(engine)))
    ))
    const ticker = yield* Effect.forkScoped(
      Effect.repeat(Effect.sync(engine.signal.notify), Schedule.spaced(POLL_INTERVAL))
    )
    // New deliveries that overtake nothing queued skip the queue (see Handoff.ts and Admission.ts).
    yield* handoff.serve(intakeOf(engine))
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        engine.stopping = true
        readiness.drain()
        engine.admission.close()
        engine.gate.close()
        yield* Fiber.interrupt(ticker)
        yield* Fiber.interrupt(loop)
        yield* drainAndRelease(engine, dispatchDrainTimeout)
      })
    )
  })
)

/**
 * One round, in ONE shared transaction: cancel what the last round could not start, log the
 * finished attempts and lease due rows; then start what was leased. The lease takes no more of a
 * webhook's rows than its share leaves, and attempts in flight only end meanwhile, so every
 * leased row of an active webhook can start. A full lease may leave more: the round goes again.
 */
const dispatchRound = (engine: Engine) =>
  Effect.gen(function*() {
    for (;;) {
      const round = yield* logAndLease(engine)
      if (round.records.length > 0) yield* afterLogging(engine, round.records, round.failing)
      // What was counted starts; the rest belongs to webhooks no longer active.
      for (const d of round.counted) offerAttempt(engine, d, yield* engine.deliveries.credentials(d, round.nowMs))
      engine.inactive = round.leased.flatMap((d) => (Boolean(d.webhook_active) ? [] : [d.id]))
      // A full lease may leave more due rows, and rows to cancel need a round.
      const more = (round.free > 0 && round.leased.length >= round.free) || engine.inactive.length > 0
      if (!more || engine.stopping) return
    }
  }).pipe(Effect.catchAllCause((cause) => Effect.logError("Dispatcher round failed", cause)))

/** What a round's transaction took and did; filled as the transaction runs, to give back if it fails. */
interface Round {
  /** The finished attempts it logs. */
  records: ReadonlyArray<AttemptRecord>
  /** The leased rows of inactive webhooks it cancels. */
  cancelled: ReadonlyArray<string>
  nowMs: number
  /** Since when each webhook of `records` has failed (AttemptLog.ts). */
  failing: ReadonlyMap<string, string>
  /** How many rows the lease asked for, and those it took. */
  free: number
  leased: ReadonlyArray<LeasedDelivery>
  /** The leased rows of active webhooks, counted in flight: to uncount if the transaction fails. */
  counted: ReadonlyArray<LeasedDelivery>
}

const noneFailing: ReadonlyMap<string, string> = new Map()

/** The round's transaction (gathered with other writes): cancel, log and lease; on failure, all is given back. */
const logAndLease = (engine: Engine) => {
  const round: Round = { records: [], cancelled: [], nowMs: 0, failing: noneFailing, free: 0, leased: [], counted: [] }
  return engine.batcher.gather(Effect.gen(function*() {
    const { outbox, admission } = engine
    // Taken as the transaction begins: attempts that finish while it gathers join it.
    round.records = engine.finished
    round.cancelled = engine.inactive
    engine.finished = []
    engine.inactive = []
    round.nowMs = Date.now()
    if (round.cancelled.length > 0) yield* outbox.cancel(round.cancelled)
    const recorded = yield* outbox.recordAttempts(engine.owner, round.records)
    round.failing = recorded.failing
    // Rows may be due only after a notify, when some may wait behind attempts in flight, or when an
    // ended delivery let the next of its person's lane go (Lanes.ts).
    const wanted = engine.signal.takeDue() || !admission.queueEmpty() || recorded.released > 0
    // Taken here, in the transaction: deliveries handed off earlier in it hold room too.
    round.free = engine.stopping || !wanted ? 0 : engine.shares.concurrency - admission.running()
    round.leased = round.free <= 0 ? [] : yield* outbox.lease(leaseRequest(engine, round.nowMs, round.free))
    // Counted before anything else joins the transaction, so a row queued after this lease is known as queued.
    round.counted = round.leased.filter((d) => Boolean(d.webhook_active))
    admission.leased(round.free, round.counted)
    return round
  })).pipe(
    // Nothing of the round was committed: its attempts are logged by the next one.
    Effect.tapErrorCause(() =>
      Effect.sync(() => {
        engine.finished = [...round.records, ...engine.finished]
        engine.inactive = [...round.cancelled, ...engine.inactive]
        for (const d of round.counted) engine.admission.finished(d)
      })
    ),
    Effect.orDie
  )
}

/**
 * Offers a row already counted in the room (leased by a round, or admitted by the hand-off) to the
 * gate, which starts it within the receivers' shares, now or once an attempt ends; a row that could
 * no longer end within its lease is not started, and its room is given back.
 */
const offerAttempt = (engine: Engine, d: LeasedDelivery, credentials: Credentials) =>
  engine.gate.offer({
    delivery: d,
    retry: d.status !== "pending",
    startBy: Date.parse(d.lease_expires_at) - engine.timeoutMs,
    start: () => startAttempt(engine, d, credentials),
    lapse: () => settleAttempt(engine, d, undefined)
  })

/**
 * Starts an attempt the gate let through: the exchange (Attempt.ts) is a plain promise, no fiber or
 * Effect timer per delivery. Once it ends, the gate lets the next waiting row through.
 */
const startAttempt = (engine: Engine, d: LeasedDelivery, credentials: Credentials) => {
  const ended = (record: AttemptRecord | undefined) => {
    // An attempt cut short by the shutdown has no record, and tells nothing of the receiver's pace.
    if (record !== undefined) engine.pace.ended(d.webhook_id, record.latencyMs)
    engine.gate.ended(d)
    settleAttempt(engine, d, record)
  }
  // attempt() answers every failure itself; the second only keeps the counts right if it ever throws.
  engine.deliveries.attempt(d, credentials, engine.shutdown.signal).then(ended, () => ended(undefined))
}

/** An attempt ended (or will not start): its room is free, its record waits for the next round, which is woken. */
const settleAttempt = (engine: Engine, d: LeasedDelivery, record: AttemptRecord | undefined) => {
  engine.admission.finished(d)
  if (record !== undefined) engine.finished.push(record)
  if (engine.stopping && engine.admission.running() === 0) Deferred.unsafeDone(engine.idle, Effect.void)
  engine.signal.wakeNow()
}

/** Once finished attempts are committed: failing webhooks may be disabled, near retries wake the loop, watchers hear. */
const afterLogging = (engine: Engine, records: ReadonlyArray<AttemptRecord>, failing: ReadonlyMap<string, string>) =>
  engine.deliveries.afterLogged(records, failing).pipe(
    Effect.zipRight(Effect.sync(() => engine.retryWake.wakeFor(records))),
    Effect.zipRight(engine.watch.logged(records))
  )

/** What the dispatcher offers the ingress: room for new deliveries that skip the queue, started once committed. */
const intakeOf = (engine: Engine): DispatcherIntake => ({
  owner: engine.owner,
  leaseMs: engine.leaseMs,
  admit: engine.admission.admit,
  startCommitted: (handed) =>
    Effect.forEach(handed, (d) =>
      // Stopping: not started. The row stays leased to this process until the shutdown's release
      // frees it, or, if it committed after that, until its lease expires.
      engine.stopping
        ? Effect.sync(() =>
          settleAttempt(engine, d, undefined)
        )
        : Effect.map(engine.deliveries.credentials(d, Date.now()), (credentials) =>
          offerAttempt(engine, d, credentials)), { discard: true }),
  releaseUncommitted: (handed) => {
    for (const d of handed) settleAttempt(engine, d, undefined)
  }
})

/**
 * The shutdown, once no round runs: in-flight attempts finish for up to `drainTimeout`, what
 * finished is logged, and every row still leased to this process is released for the next start.
 */
const drainAndRelease = (engine: Engine, drainTimeout: Duration.Duration) =>
  Effect.gen(function*() {
    const { admission } = engine
    engine.retryWake.clear()
    yield* Effect.logInfo("Dispatcher draining").pipe(Effect.annotateLogs({ inFlight: admission.running() }))
    if (admission.running() === 0) yield* Deferred.succeed(engine.idle, undefined)
    // Finalizers run uninterruptibly; the wait must be interruptible for the bound to cut it short.
    yield* Effect.timeout(Effect.interruptible(Deferred.await(engine.idle)), drainTimeout).pipe(Effect.ignore)
    const unfinished = admission.running()
    // What is still in flight is abandoned: not logged, released below, sent again by the next start.
    engine.shutdown.abort()
    yield* logFinished(engine, engine.finished.splice(0)).pipe(
      Effect.catchAllCause((cause) => Effect.logError("Dispatcher could not log attempts", cause))
    )
    yield* engine.batcher.run(engine.outbox.release(engine.owner, "all")).pipe(Effect.orDie)
    yield* Effect.logInfo("Dispatcher stopped").pipe(Effect.annotateLogs({ unfinished }))
  })

/** Logs what finished; returns after the commit. */
const logFinished = (engine: Engine, records: ReadonlyArray<AttemptRecord>) =>
  records.length === 0 ? Effect.void : engine.batcher.run(engine.outbox.recordAttempts(engine.owner, records)).pipe(
    Effect.orDie,
    Effect.flatMap((recorded) => afterLogging(engine, records, recorded.failing))
  )

/** What a round asks of the lease: `limit` rows for the lease's length, within the shares, given what is in flight. */
const leaseRequest = (engine: Engine, nowMs: number, limit: number): LeaseRequest => ({
  owner: engine.owner,
  now: iso(nowMs),
  leaseUntil: iso(nowMs + engine.leaseMs),
  limit,
  perWebhook: engine.shares.perWebhook,
  inFlight: engine.admission.inFlight(),
  perOrganization: engine.shares.perOrganization,
  inFlightByOrganization: engine.admission.inFlightByOrganization(),
  overShareRoom: engine.admission.overShareRoom()
})

/** Wakes the loop when a retry falls due before the next scheduled poll. */
interface RetryWaker {
  readonly wakeFor: (records: ReadonlyArray<AttemptRecord>) => void
  /** Drops the timers set. */
  readonly clear: () => void
}

const retryWaker = (notify: () => void): RetryWaker => {
  const timers = new Set<ReturnType<typeof setTimeout>>()
  return {
    wakeFor: (records) => {
      const nowMs = Date.now()
      const soonest = records.reduce(
        (min, r) => (r.result._tag === "RetryAt" ? Math.min(min, Date.parse(r.result.at) - nowMs) : min),
        Infinity
      )
      if (soonest < Duration.toMillis(POLL_INTERVAL)) {
        const timer = setTimeout(() => {
          timers.delete(timer)
          notify()
        }, Math.max(0, soonest))
        timers.add(timer)
      }
    },
    clear: () => {
      for (const timer of timers) clearTimeout(timer)
    }
  }
}

/**
 * Reports the outbox at each metrics scrape; the rows leased, and those of them waiting their turn
 * at the gate, are this process's own, which only it knows.
 */
const reportAtScrape = (engine: Engine) =>
  Effect.gen(function*() {
    const states = outboxStateQueries(yield* SqlClient.SqlClient)
    yield* (yield* Metrics).outboxAtScrape(Effect.suspend(() => {
      const nowMs = Date.now()
      return Effect.map(states.read(iso(nowMs)), (counts) => ({
        due: counts.due,
        leased: engine.admission.running(),
        waiting: engine.gate.waiting(),
        failed: counts.failed,
        dead: counts.dead,
        oldestDueAgeSeconds: counts.oldestDueAt === null
          ? 0
          : Math.max(0, (nowMs - Date.parse(counts.oldestDueAt)) / 1000)
      }))
    }))
  })

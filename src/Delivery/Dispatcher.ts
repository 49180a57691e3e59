/**
 * READ THIS FIRST: the delivery engine. A delivery's path through src/Delivery/, in order:
 *  1. Enqueue.ts: in the transaction that stores an upstream event (UpstreamEvents/Ingress.ts) or a test
 *     event (Webhooks/TestEvents.ts), one pending row per active webhook that takes the event; the
 *     dispatcher's intake (Handoff.ts) is asked of each row whether it may skip the queue
 *     (Admission.ts, within the shares of Fairness.ts): if so, it is written leased to this process
 *     and started once the transaction commits. Outbox.ts holds the SQL.
 *  2. DispatchSignal.ts: queued rows wake the dispatcher (every replica's, on PostgreSQL).
 *  3. This file: a round logs finished attempts (AttemptLog.ts) and leases due rows (Lease.ts:
 *     first attempts before retries, within the shares of Fairness.ts), in one transaction.
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
 * starts the leased attempts within bounded concurrency overall, per webhook and per organization.
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
import { makeDeliveries } from "./Attempt.js"
import type { Credentials } from "./Credentials.js"
import { DeliveryWatch } from "./DeliveryWatch.js"
import { DispatchSignal } from "./DispatchSignal.js"
import type { Shares } from "./Fairness.js"
import { Handoff } from "./Handoff.js"
import type { LeaseRequest } from "./Lease.js"
import { OutboxRepo } from "./Outbox.js"
import { outboxStateQueries } from "./OutboxStates.js"
import type { AttemptRecord, LeasedDelivery } from "./Records.js"

const POLL_INTERVAL = Duration.seconds(1)

const iso = (ms: number) => new Date(ms).toISOString()

/** Reports the outbox at each metrics scrape; the rows leased are this process's own, which only it knows (`leased`). */
const reportAtScrape = (leased: () => number) =>
  Effect.gen(function*() {
    const states = outboxStateQueries(yield* SqlClient.SqlClient)
    yield* (yield* Metrics).outboxAtScrape(Effect.suspend(() => {
      const nowMs = Date.now()
      return Effect.map(states.read(iso(nowMs)), (counts) => ({
        due: counts.due,
        leased: leased(),
        failed: counts.failed,
        dead: counts.dead,
        oldestDueAgeSeconds: counts.oldestDueAt === null
          ? 0
          : Math.max(0, (nowMs - Date.parse(counts.oldestDueAt)) / 1000)
      }))
    }))
  })

/** Wakes the loop (`notify`) when a retry falls due before the next scheduled poll; `clear` drops the timers set. */
const retryWaker = (notify: () => void) => {
  const timers = new Set<ReturnType<typeof setTimeout>>()
  return {
    wakeFor: (records: ReadonlyArray<AttemptRecord>) => {
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

/** What a round asks of the lease: `limit` rows until `untilMs`, within the shares, given what is in flight. */
const leaseRequest = (
  admission: Admission,
  shares: Shares,
  owner: string,
  nowMs: number,
  untilMs: number,
  limit: number
): LeaseRequest => ({
  owner,
  now: iso(nowMs),
  leaseUntil: iso(untilMs),
  limit,
  perWebhook: shares.perWebhook,
  inFlight: admission.inFlight(),
  perOrganization: shares.perOrganization,
  inFlightByOrganization: admission.inFlightByOrganization(),
  overShareRoom: admission.overShareRoom()
})

/**
 * The dispatcher. One closure (about 150 lines) on purpose: the round, the hand-off's intake and the
 * shutdown share its state (what finished, what to cancel, whether it is stopping, the admission's
 * counts), which only this fiber's code touches.
 */
export const DispatcherLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    const outbox = yield* OutboxRepo
    const signal = yield* DispatchSignal
    const batcher = yield* WriteBatcher
    const handoff = yield* Handoff
    const readiness = yield* Readiness
    const deliveries = yield* makeDeliveries
    const watch = yield* DeliveryWatch

    const owner = `${hostname()}:${process.pid}:${crypto.randomUUID()}`
    // A lease outlives the longest attempt (the timeout) by a margin before another process may take the row.
    const leaseMs = Duration.toMillis(config.webhookTimeout) + Duration.toMillis(config.dispatchLeaseMargin)
    const shares = {
      concurrency: config.dispatchConcurrency,
      perWebhook: config.dispatchPerWebhook,
      perOrganization: config.dispatchPerOrganization
    }
    const admission = makeAdmission(shares)
    let stopping = false
    /** Attempts finished since the last round, waiting to be logged. */
    let finished: Array<AttemptRecord> = []
    /** Aborts the attempts still in flight when the drain time is up. */
    const shutdown = new AbortController()
    const idle = yield* Deferred.make<void>()
    const retryWake = retryWaker(signal.notifyNow)

    yield* reportAtScrape(admission.running)

    const settle = (d: LeasedDelivery, record: AttemptRecord | undefined) => {
      admission.finished(d)
      if (record !== undefined) finished.push(record)
      if (stopping && admission.running() === 0) Deferred.unsafeDone(idle, Effect.void)
      signal.wakeNow()
    }

    /** Starts an attempt already counted in flight (leased by a round, or admitted by the hand-off). */
    const start = (d: LeasedDelivery, credentials: Credentials) => {
      deliveries.attempt(d, credentials, shutdown.signal).then(
        (record) => settle(d, record),
        // attempt() answers every failure itself; this only keeps the counts right if it ever throws.
        () => settle(d, undefined)
      )
    }

    /** Once finished attempts are committed: failing webhooks may be disabled, near retries wake the loop, watchers hear. */
    const afterLogging = (records: ReadonlyArray<AttemptRecord>, failing: ReadonlyMap<string, string>) =>
      deliveries.afterLogged(records, failing).pipe(
        Effect.zipRight(Effect.sync(() => retryWake.wakeFor(records))),
        Effect.zipRight(watch.logged(records))
      )

    /** Logs what finished; returns after the commit. */
    const logFinished = (records: ReadonlyArray<AttemptRecord>) =>
      records.length === 0 ? Effect.void : batcher.run(outbox.recordAttempts(owner, records)).pipe(
        Effect.orDie,
        Effect.flatMap((failing) => afterLogging(records, failing))
      )

    /** Leased rows of webhooks no longer active, to cancel. */
    let inactive: Array<string> = []

    /**
     * One round, in ONE shared transaction: cancel what the last round could not start, log the
     * finished attempts and lease due rows; then start what was leased. The lease takes no more of a
     * webhook's rows than its share leaves, and attempts in flight only end meanwhile, so every
     * leased row of an active webhook can start.
     */
    const round = Effect.gen(function*() {
      for (;;) {
        // Taken as the transaction begins: attempts that finish while it gathers join it.
        let records: ReadonlyArray<AttemptRecord> = []
        let cancelled: ReadonlyArray<string> = []
        let nowMs = 0
        /** Leased rows counted in flight, to uncount if the transaction fails. */
        let counted: ReadonlyArray<LeasedDelivery> = []
        const [failing, leased, free] = yield* batcher.gather(Effect.gen(function*() {
          records = finished
          cancelled = inactive
          finished = []
          inactive = []
          nowMs = Date.now()
          if (cancelled.length > 0) yield* outbox.cancel(cancelled)
          const failing = yield* outbox.recordAttempts(owner, records)
          // Rows may be due only after a notify, or when some may wait behind attempts in flight.
          const wanted = signal.takeDue() || !admission.queueEmpty()
          // Taken here, in the transaction: deliveries handed off earlier in it hold room too.
          const free = stopping || !wanted ? 0 : config.dispatchConcurrency - admission.running()
          const leased = free <= 0
            ? []
            : yield* outbox.lease(leaseRequest(admission, shares, owner, nowMs, nowMs + leaseMs, free))
          // Counted before anything else joins the transaction, so a row queued after this lease is known as queued.
          counted = leased.filter((d) => Boolean(d.webhook_active))
          admission.leased(free, counted)
          return [failing, leased, free] as const
        })).pipe(
          // Nothing of the round was committed: its attempts are logged by the next one.
          Effect.tapErrorCause(() =>
            Effect.sync(() => {
              finished = [...records, ...finished]
              inactive = [...cancelled, ...inactive]
              for (const d of counted) admission.finished(d)
            })
          ),
          Effect.orDie
        )
        if (records.length > 0) yield* afterLogging(records, failing)
        // What was counted starts; the rest belongs to webhooks no longer active.
        for (const d of counted) start(d, yield* deliveries.credentials(d, nowMs))
        inactive = leased.flatMap((d) => (Boolean(d.webhook_active) ? [] : [d.id]))
        // A full lease may leave more due rows, and rows to cancel need a round.
        const more = (free > 0 && leased.length >= free) || inactive.length > 0
        if (!more || stopping) return
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logError("Dispatcher round failed", cause)))

    const loop = yield* Effect.forkScoped(Effect.forever(
      // A round is never cut in half: what it logged or leased is known once it returns.
      Effect.zipRight(signal.wait, Effect.uninterruptible(round))
    ))
    const ticker = yield* Effect.forkScoped(Effect.repeat(signal.notify, Schedule.spaced(POLL_INTERVAL)))

    // New deliveries that overtake nothing queued skip the queue (see Handoff.ts and Admission.ts).
    yield* handoff.serve({
      owner,
      leaseMs,
      admit: admission.admit,
      startCommitted: (handed) =>
        Effect.forEach(handed, (d) =>
          // Stopping: not started. The row stays leased to this process until the shutdown's release
          // below frees it, or, if it committed after that, until its lease expires.
          stopping
            ? Effect.sync(() => settle(d, undefined))
            : Effect.map(deliveries.credentials(d, Date.now()), (credentials) => start(d, credentials)), {
          discard: true
        }),
      releaseUncommitted: (handed) => {
        for (const d of handed) settle(d, undefined)
      }
    })

    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
        readiness.drain()
        admission.close()
        yield* Fiber.interrupt(ticker)
        yield* Fiber.interrupt(loop)
        retryWake.clear()
        yield* Effect.logInfo("Dispatcher draining").pipe(Effect.annotateLogs({ inFlight: admission.running() }))
        if (admission.running() === 0) yield* Deferred.succeed(idle, undefined)
        // Finalizers run uninterruptibly; the wait must be interruptible for the bound to cut it short.
        yield* Effect.timeout(Effect.interruptible(Deferred.await(idle)), config.dispatchDrainTimeout).pipe(
          Effect.ignore
        )
        const unfinished = admission.running()
        // What is still in flight is abandoned: not logged, released below, sent again by the next start.
        shutdown.abort()
        yield* logFinished(finished.splice(0)).pipe(
          Effect.catchAllCause((cause) => Effect.logError("Dispatcher could not log attempts", cause))
        )
        yield* batcher.run(outbox.release(owner, "all")).pipe(Effect.orDie)
        yield* Effect.logInfo("Dispatcher stopped").pipe(Effect.annotateLogs({ unfinished }))
      })
    )
  })
)

/**
 * The dispatcher: a fiber started with the server that drains the persisted outbox. It wakes on the
 * DispatchSignal (new rows committed, a slot freed, a near retry due) and on a Schedule otherwise
 * (due retries, leases expired by a crashed process), leases due rows (first attempts before retries)
 * within bounded concurrency overall and per webhook, signs and POSTs each, and logs every attempt.
 * On shutdown it stops leasing, lets in-flight deliveries finish for up to HUB_DISPATCH_DRAIN_TIMEOUT,
 * and releases the rest so the next start takes them at once.
 */
import { Cause, Duration, Effect, Fiber, FiberSet, Layer, Schedule } from "effect"
import { hostname } from "node:os"
import { HubConfig } from "../Config.js"
import { makeDeliver } from "./Delivery.js"
import { DispatchSignal } from "./DispatchSignal.js"
import { type AttemptResult, type LeasedDelivery, OutboxRepo } from "./Outbox.js"

const POLL_INTERVAL = Duration.seconds(1)

const iso = (ms: number) => new Date(ms).toISOString()

export const DispatcherLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    const outbox = yield* OutboxRepo
    const signal = yield* DispatchSignal

    const owner = `${hostname()}:${process.pid}:${crypto.randomUUID()}`
    // A lease outlives the longest attempt (the timeout) by a margin before another process may take the row.
    const leaseMs = Duration.toMillis(config.webhookTimeout) + Duration.toMillis(config.dispatchLeaseMargin)
    const inFlight = new Map<string, number>()
    let running = 0
    let stopping = false

    const deliver = yield* makeDeliver(owner)
    const scope = yield* Effect.scope

    /** Wakes the loop when a retry falls due before the next scheduled poll. */
    const wakeAt = (result: AttemptResult | undefined, nowMs: number) =>
      result?._tag === "RetryAt" && Date.parse(result.at) - nowMs < Duration.toMillis(POLL_INTERVAL)
        ? Effect.asVoid(Effect.forkIn(Effect.delay(signal.notify, Duration.millis(Math.max(0, Date.parse(result.at) - nowMs))), scope))
        : Effect.void

    const attempt = (d: LeasedDelivery) =>
      deliver(d).pipe(
        Effect.flatMap((result) => wakeAt(result, Date.now())),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("Webhook delivery failed unexpectedly", cause).pipe(Effect.annotateLogs({ deliveryId: d.id }))
        )
      )

    const fibers = yield* FiberSet.make<void>()

    const finished = (webhookId: string) =>
      Effect.sync(() => {
        running--
        const left = (inFlight.get(webhookId) ?? 1) - 1
        if (left <= 0) inFlight.delete(webhookId)
        else inFlight.set(webhookId, left)
      }).pipe(Effect.zipRight(signal.notify))

    /** Leases and starts due deliveries until the slots are full or nothing more is due. */
    const fill = Effect.gen(function*() {
      while (!stopping) {
        const free = config.dispatchConcurrency - running
        if (free <= 0) return
        const saturated = [...inFlight].filter(([, n]) => n >= config.dispatchPerWebhook).map(([id]) => id)
        const nowMs = Date.now()
        const leased = yield* outbox.lease({
          owner,
          now: iso(nowMs),
          leaseUntil: iso(nowMs + leaseMs),
          limit: free,
          skipWebhooks: saturated
        })
        const over: Array<string> = []
        for (const d of leased) {
          const busy = inFlight.get(d.webhook_id) ?? 0
          if (busy >= config.dispatchPerWebhook) {
            over.push(d.id)
            continue
          }
          inFlight.set(d.webhook_id, busy + 1)
          running++
          yield* FiberSet.run(fibers, Effect.ensuring(attempt(d), finished(d.webhook_id)))
        }
        // Rows beyond a webhook's share go back at once; that webhook is skipped until a slot frees.
        yield* outbox.release(owner, over)
        if (leased.length < free) return
      }
    }).pipe(Effect.catchAllCause((cause) => Effect.logError("Dispatcher could not lease deliveries", cause)))

    const loop = yield* Effect.forkScoped(Effect.forever(Effect.zipRight(signal.wait, fill)))
    const ticker = yield* Effect.forkScoped(Effect.repeat(signal.notify, Schedule.spaced(POLL_INTERVAL)))

    // Runs before the fiber set's own finalizer (added earlier), so in-flight deliveries get their time.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        stopping = true
        yield* Fiber.interrupt(ticker)
        yield* Fiber.interrupt(loop)
        yield* Effect.logInfo("Dispatcher draining").pipe(Effect.annotateLogs({ inFlight: running }))
        // Finalizers run uninterruptibly; the wait must be interruptible for the bound to cut it short.
        yield* Effect.timeout(Effect.interruptible(FiberSet.awaitEmpty(fibers)), config.dispatchDrainTimeout).pipe(Effect.ignore)
        yield* FiberSet.clear(fibers)
        yield* outbox.release(owner, "all")
        yield* Effect.logInfo("Dispatcher stopped").pipe(Effect.annotateLogs({ unfinished: running }))
      })
    )
  })
)

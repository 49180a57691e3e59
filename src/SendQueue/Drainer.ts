/**
 * Read this first: the queue's drainer, one per replica, all draining the same `send_queue`.
 *
 * A round (`drainRound`): leases that a lost replica left are recovered, sends whose validity ended are
 * given up, then each number with sends due gets a lease of what fits its next quarter second of
 * throughput (transactional first, per person in order and within Meta's pair rate: SendQueue/Repo.ts
 * `lease`). Each leased send (`sendQueued`) waits for its place in the number's pacing (the budget
 * synchronous sends take from too: Messages/Pacing.ts), is marked `sending`, and goes to the Graph; its
 * outcome (`settle`) is the record accepted, a retry after the backoff, or the record failed with its
 * reason (SendQueue/Rules.ts says which). A send whose Graph call began is never made again: if its
 * replica dies, the lease runs out and the send ends `outcome_unknown`.
 *
 * Rounds run when a send is queued or one ends here (the signal), and otherwise when the next queued
 * send falls due, at least every POLL (other replicas' sends, leases to recover).
 */
import { Cause, Duration, Effect, Either, Exit, Fiber, FiberSet, Queue, Schema, SubscriptionRef } from "effect"
import { hostname } from "node:os"
import { type JsonObject, JsonObjectSchema } from "../Domain/Json.js"
import type { InstanceRef } from "../Domain/Principal.js"
import type { FailureReason } from "../Domain/Vocabulary.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { identityLinksOfAnswer } from "../Messages/Identities.js"
import { OPTED_OUT_CODE } from "../Messages/OptOuts.js"
import { Pacing, PacingLive } from "../Messages/Pacing.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { errorRecord } from "../Messages/Send.js"
import { Metrics } from "../Metrics/Metrics.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { type SendEndpoint, sendEndpoints, type SendMessageResponse, Upstream } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"
import { type QueuedSendRef, QueueEvents } from "./QueueEvents.js"
import { type QueuedRow, SendQueueRepo, type TakenRow } from "./Repo.js"
import { backoffMs, nextPairTat, PAIR_BURST, PAIR_INTERVAL_MS, priorityRank, verdictOf } from "./Rules.js"

/** How often a round runs when nothing signals: other replicas' sends, leases to recover. */
const POLL = Duration.seconds(1)
/** Each lease takes what a number can send in this long: a transactional send waits at most about that behind bulk. */
const LEASE_WINDOW_MS = 250
/** How long a lease holds before another replica may take the send (or, once sending, call it lost). */
const LEASE_MS = 60_000
/** Sends of the queue in flight at once, per replica (the Graph calls of all numbers). */
const MAX_IN_FLIGHT = 512

const isEndpoint = (text: string): text is SendEndpoint => (sendEndpoints as ReadonlyArray<string>).includes(text)

const decodeBody = Schema.decodeUnknownSync(Schema.parseJson(JsonObjectSchema))
/** A stored JSON object (the body, an error): written by the hub, so it always decodes. */
const parsedBody = (text: string): JsonObject => decodeBody(text)

/** The queued send an outcome is told of (SendQueue/QueueEvents.ts). */
const refOf = (row: Omit<TakenRow, "last_error">): QueuedSendRef => ({
  messageId: row.message_id,
  organizationId: row.organization_id,
  instanceId: row.instance_id,
  phoneNumberId: row.phone_number_id,
  to: row.party,
  attempts: row.attempts
})

const instanceOf = (row: QueuedRow): InstanceRef => ({
  id: row.instance_id,
  organizationId: row.organization_id,
  phoneNumberId: row.phone_number_id,
  wabaId: row.waba_id
})

export class SendQueueDrainer extends Effect.Service<SendQueueDrainer>()("SendQueueDrainer", {
  scoped: Effect.gen(function*() {
    const repo = yield* SendQueueRepo
    const messages = yield* MessagesRepo
    const upstream = yield* Upstream
    const access = yield* InstanceAccess
    const pacing = yield* Pacing
    const throughput = yield* Throughput
    const queueEvents = yield* QueueEvents
    const metrics = yield* Metrics
    const clock = yield* Effect.clock
    const owner = `${hostname()}:${process.pid}:${crypto.randomUUID()}`
    const signal = yield* Queue.sliding<void>(1)
    const wake = () => signal.unsafeOffer(undefined)
    const semaphore = yield* Effect.makeSemaphore(MAX_IN_FLIGHT)
    // The sends under way, closed with the layer: what waits for its turn is given back, what is sending ends first.
    const sending = yield* FiberSet.make()
    /** Sends leased here and not yet ended, per number: a number's next lease takes only what is left of its window. */
    const heldOf = new Map<string, number>()
    const now = () => clock.unsafeCurrentTimeMillis()
    /** How many queued sends ended here (made, retried later or given up): tests wait on its changes. */
    const settled = yield* SubscriptionRef.make(0)
    const counted = SubscriptionRef.update(settled, (n) => n + 1)

    const release = (row: QueuedRow) => {
      const left = (heldOf.get(row.phone_number_id) ?? 1) - 1
      if (left > 0) heldOf.set(row.phone_number_id, left)
      else heldOf.delete(row.phone_number_id)
    }

    /** The record of a send the queue gave up, with why (and Meta's error when it answered one). */
    const giveUp = (send: QueuedSendRef, reason: FailureReason, error: JsonObject | undefined) =>
      Effect.sync(() => metrics.queueSend(send.phoneNumberId, reason)).pipe(
        Effect.zipRight(messages.markQueueFailed(send.messageId, reason, error)),
        Effect.zipRight(
          queueEvents.told(send, { status: "failed", reason, error }, repo.finish({ messageId: send.messageId }))
        ),
        Effect.catchAll((cause) =>
          Effect.logError("Could not record a queued send given up", { messageId: send.messageId, cause })
        )
      )

    /** Waits for the send's place in its number's pacing (shared with synchronous sends). */
    const paced = (row: QueuedRow): Effect.Effect<void> =>
      Effect.suspend(() => {
        const taken = pacing.takeAt(row.phone_number_id, now(), row.priority === priorityRank.bulk ? "bulk" : "first")
        return Effect.flatMap(
          taken instanceof Promise ? Effect.promise(() => taken) : Effect.succeed(taken),
          (refused) =>
            refused === undefined
              ? Effect.void
              : Effect.zipRight(
                Effect.sleep(Duration.millis(1000 / throughput.rateNow(row.phone_number_id))),
                paced(row)
              )
        )
      })

    /** The outcome of one queued send's Graph call, recorded. */
    const settle = (row: QueuedRow, sentAt: number, outcome: Either.Either<SendMessageResponse, UpstreamError>) =>
      Effect.gen(function*() {
        const pair = { phoneNumberId: row.phone_number_id, party: row.party }
        if (Either.isRight(outcome)) {
          const waMessageId = outcome.right.messages[0]?.id
          if (waMessageId !== undefined) {
            const marked = yield* Effect.promise(() => messages.markAcceptedNow(row.message_id, waMessageId))
            if (Exit.isFailure(marked)) {
              yield* Effect.logError("A queued send was accepted but could not be marked", {
                messageId: row.message_id,
                waMessageId
              })
            }
          }
          const links = identityLinksOfAnswer(row.organization_id, outcome.right)
          if (links.length > 0) yield* Effect.ignore(messages.learnIdentities(links))
          metrics.queueSend(row.phone_number_id, "sent")
          return yield* queueEvents.told(
            refOf(row),
            { status: "sent", waMessageId },
            repo.finish({
              messageId: row.message_id,
              pair: { ...pair, tat: nextPairTat(row.pair_tat ?? undefined, sentAt) }
            })
          )
        }
        const error = outcome.left
        const verdict = verdictOf(error)
        const record = errorRecord(error)
        if (verdict._tag === "Retry") {
          const dueAt = now() + backoffMs(row.attempts + 1, error.retryAfterSeconds)
          if (dueAt < row.expires_at) {
            metrics.queueSend(row.phone_number_id, "retried")
            return yield* repo.retryLater({
              messageId: row.message_id,
              dueAt,
              error: JSON.stringify(record),
              // Meta's pair rate refused it: only this person waits, as if a whole burst had been spent.
              ...(verdict.pairOnly
                ? { pair: { ...pair, tat: dueAt + (PAIR_BURST - 1) * PAIR_INTERVAL_MS } }
                : {})
            })
          }
          return yield* giveUp(refOf(row), "expired", record)
        }
        if (error.code === OPTED_OUT_CODE) {
          // The person stopped the business's marketing messages: later broadcasts skip them.
          yield* Effect.ignore(messages.recordOptOuts([{
            _tag: "OptOut",
            wabaId: row.waba_id,
            party: row.party,
            stopped: true,
            at: new Date().toISOString()
          }]))
        }
        yield* giveUp(refOf(row), verdict._tag === "Refused" ? "refused" : "outcome_unknown", record)
      })

    /** A leased send whose turn came: `sending`, the Graph call, the outcome recorded. */
    const sendLeased = (row: QueuedRow) =>
      Effect.gen(function*() {
        if (now() >= row.expires_at) return yield* giveUp(refOf(row), "expired", undefined)
        const target = yield* Effect.either(access.target(instanceOf(row)))
        if (Either.isLeft(target)) {
          // The instance is gone or cannot reach Meta: a later try would fare the same.
          return yield* giveUp(refOf(row), "refused", { message: target.left.message })
        }
        // Cancelled while it waited its turn (or no longer this replica's): not sent, nothing to record.
        if (!(yield* repo.claimSending(row.message_id, owner, now() + LEASE_MS))) return
        const sentAt = now()
        const endpoint = isEndpoint(row.endpoint) ? row.endpoint : "messages"
        const outcome = yield* Effect.promise(() => upstream.sendMessage(target.right, parsedBody(row.body), endpoint))
        yield* settle(row, sentAt, outcome)
      })

    /**
     * One leased send: its place in the pacing (a replica stopping meanwhile gives the send back to the
     * queue), then the send, which once begun runs to its end (the Graph call has its deadline).
     */
    const sendQueued = (row: QueuedRow) =>
      Effect.zipRight(paced(row), Effect.uninterruptible(sendLeased(row))).pipe(
        semaphore.withPermits(1),
        Effect.onInterrupt(() => Effect.ignore(repo.giveBack([row.message_id]))),
        Effect.catchAllCause((cause) =>
          Cause.isInterruptedOnly(cause) ? Effect.void : Effect.logError(
            "A queued send could not be settled; its lease will run out",
            { messageId: row.message_id, cause }
          )
        ),
        Effect.ensuring(Effect.zipRight(
          Effect.sync(() => {
            release(row)
            wake()
          }),
          counted
        ))
      )

    /** Leases what fits the number's next window and starts each send. */
    const drainNumber = (phoneNumberId: string, at: number) =>
      Effect.gen(function*() {
        const rate = throughput.rateNow(phoneNumberId)
        const window = Math.max(1, Math.ceil((rate * LEASE_WINDOW_MS) / 1000))
        const room = window - (heldOf.get(phoneNumberId) ?? 0)
        if (room <= 0) return
        const rows = yield* repo.lease({
          phoneNumberId,
          limit: room,
          now: at,
          owner,
          leaseUntil: at + LEASE_MS,
          pairBurstMs: (PAIR_BURST - 1) * PAIR_INTERVAL_MS
        })
        heldOf.set(phoneNumberId, (heldOf.get(phoneNumberId) ?? 0) + rows.length)
        // The number's live level, read when first used and hourly (in the background: the lease goes on at the known rate).
        if (rows[0] !== undefined) yield* FiberSet.run(sending, throughput.refresh(instanceOf(rows[0])))
        for (const row of rows) yield* FiberSet.run(sending, sendQueued(row))
      })

    const drainRound = Effect.gen(function*() {
      const at = now()
      // Both are taken out of the queue as they are read; each is then recorded and told.
      for (const lost of yield* repo.recoverLeases(at)) {
        yield* giveUp(
          refOf(lost),
          "outcome_unknown",
          lost.last_error === null ? undefined : parsedBody(lost.last_error)
        )
        yield* counted
      }
      for (const expired of yield* repo.takeExpired(at)) {
        yield* giveUp(
          refOf(expired),
          "expired",
          expired.last_error === null ? undefined : parsedBody(expired.last_error)
        )
        yield* counted
      }
      for (const phoneNumberId of yield* repo.dueNumbers(at)) yield* drainNumber(phoneNumberId, at)
    })

    /** Until the next round: a signal, or the soonest queued send falling due (at most POLL). */
    const untilNextRound = Effect.gen(function*() {
      const next = yield* Effect.orElseSucceed(repo.nextDueAt, () => undefined)
      const delay = next === undefined
        ? Duration.toMillis(POLL)
        : Math.min(Duration.toMillis(POLL), Math.max(0, next - now()))
      yield* Effect.raceFirst(Queue.take(signal), Effect.sleep(Duration.millis(delay)))
    })

    const loop = Effect.forever(
      Effect.zipRight(
        drainRound.pipe(Effect.catchAllCause((cause) => Effect.logWarning("A round of the send queue failed", cause))),
        untilNextRound
      )
    )
    yield* metrics.queueAtScrape(Effect.orDie(Effect.suspend(() => repo.readings(now()))))
    const fiber = yield* Effect.forkScoped(loop)
    yield* Effect.addFinalizer(() => Fiber.interrupt(fiber))
    return {
      /** Wakes the drainer: a send was queued. */
      wake,
      /** How many queued sends ended here (made, retried later or given up), then each change: tests wait on it. */
      settled: settled.changes,
      /** Sends of this replica's leases not yet ended (tests and the metrics read it). */
      inFlight: () => {
        let total = 0
        for (const held of heldOf.values()) total += held
        return total
      }
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

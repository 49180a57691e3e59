/**
 * What becomes of a queued send once its Graph call answered or its replica was lost, recorded and told:
 * the record accepted, a retry after the backoff, or the record failed with its reason (SendQueue/Rules.ts
 * says which), each outcome told as a `hub.message_queue` event (SendQueue/QueueEvents.ts).
 */
import { Effect, Either, Exit } from "effect"
import { type JsonObject, parseJsonObject } from "../Domain/Json.js"
import type { FailureReason } from "../Domain/Vocabulary.js"
import { identityLinksOfAnswer } from "../Messages/Identities.js"
import { OPTED_OUT_CODE } from "../Messages/OptOuts.js"
import type { MessagesRepo } from "../Messages/Repo.js"
import { errorRecord } from "../Messages/SendRecords.js"
import type { HubMetrics } from "../Metrics/Metrics.js"
import { untilStored } from "../Sql/Unavailable.js"
import type { SendMessageResponse } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"
import type { QueuedSendRef, QueueEvents, Telling } from "./QueueEvents.js"
import type { QueuedRow, SendQueueRepo, TakenRow } from "./Repo.js"
import { backoffMs, nextPairTat, PAIR_BURST, PAIR_INTERVAL_MS, verdictOf } from "./Rules.js"

/** What recording an outcome takes. */
export interface OutcomeContext {
  readonly repo: SendQueueRepo
  readonly messages: MessagesRepo
  readonly queueEvents: QueueEvents
  readonly metrics: HubMetrics
  readonly now: () => number
}

/** What recording a Graph call's outcome takes: also a way to run effects from plain code. */
export interface SettleContext extends OutcomeContext {
  /** Runs an effect from the plain code of a send (its logs as the drainer's). */
  readonly run: <A>(effect: Effect.Effect<A>) => Promise<A>
}

/**
 * A stored JSON object (a send's body, an error), parsed. The hub wrote it with JSON.stringify, so it
 * always parses: anything else is a defect. JSON.parse alone, not a schema's walk of the value (see
 * Domain/Json.ts): this is on every queued send's path.
 */
export const parsedBody = (text: string): JsonObject => {
  const parsed = parseJsonObject(text)
  if (parsed === undefined) throw new Error(`A JSON object the hub stored does not parse: ${text.slice(0, 80)}`)
  return parsed
}

/** The queued send an outcome is told of. */
export const refOf = (row: Omit<TakenRow, "last_error">): QueuedSendRef => ({
  messageId: row.message_id,
  organizationId: row.organization_id,
  instanceId: row.instance_id,
  phoneNumberId: row.phone_number_id,
  to: row.party,
  attempts: row.attempts
})

/** The record of a send the queue gave up, with why (and Meta's error when it answered one), told. */
export const giveUp = (
  context: OutcomeContext,
  send: QueuedSendRef,
  reason: FailureReason,
  error: JsonObject | undefined
) =>
  Effect.sync(() => context.metrics.queueSend(send.phoneNumberId, reason)).pipe(
    // Through a database outage: a send left leased would be taken for lost, its outcome unknown.
    Effect.zipRight(untilStored(context.messages.markQueueFailed(send.messageId, reason, error))),
    Effect.zipRight(untilStored(
      context.queueEvents.told({
        send,
        outcome: { status: "failed", reason, error },
        finish: { messageId: send.messageId }
      })
    )),
    Effect.catchAll((cause) =>
      Effect.logError("Could not record a queued send given up", { messageId: send.messageId, cause })
    )
  )

/**
 * A send whose replica was lost during its Graph call: its outcome is unknown and it is never made
 * again. Unless its record holds Meta's id already: a replica of an earlier version recorded the
 * acceptance in a commit of its own before taking the send off the queue (now both are one commit),
 * and one killed between the two left it so; it was sent, and is told so.
 */
export const settleLost = (context: OutcomeContext, lost: TakenRow) =>
  Effect.gen(function*() {
    const record = yield* context.messages.findById(lost.message_id)
    if (record?.wa_message_id !== null && record?.wa_message_id !== undefined) {
      context.metrics.queueSend(lost.phone_number_id, "sent")
      return yield* context.queueEvents.told({
        send: refOf(lost),
        outcome: { status: "sent", waMessageId: record.wa_message_id },
        finish: undefined
      })
    }
    const error = lost.last_error === null ? undefined : parsedBody(lost.last_error)
    yield* giveUp(context, refOf(lost), "outcome_unknown", error)
  }).pipe(
    Effect.catchAll((cause) =>
      Effect.logError("Could not settle a send whose replica was lost", { messageId: lost.message_id, cause })
    )
  )

/**
 * Meta accepted the send: its record gets the wamid, the pair's rate moves on, the outcome is told, all
 * in one group commit. Plain async code (see SendQueue/LeasedSends.ts), as nearly every send ends here.
 */
const accepted = async (context: SettleContext, row: QueuedRow, sentAt: number, answer: SendMessageResponse) => {
  const waMessageId = answer.messages[0]?.id
  const links = identityLinksOfAnswer(row.organization_id, answer)
  if (links.length > 0) await context.run(Effect.ignore(context.messages.learnIdentities(links)))
  context.metrics.queueSend(row.phone_number_id, "sent")
  const telling: Telling = {
    send: refOf(row),
    outcome: { status: "sent", waMessageId },
    finish: {
      messageId: row.message_id,
      madeAt: sentAt,
      pair: {
        phoneNumberId: row.phone_number_id,
        party: row.party,
        tat: nextPairTat(row.pair_tat ?? undefined, sentAt)
      }
    },
    ...(waMessageId === undefined ? {} : { accepted: waMessageId })
  }
  const told = await context.queueEvents.tellNow(telling)
  if (Exit.isSuccess(told)) return
  // Once Meta took it, the send must keep its id through a database outage: tried until stored.
  await context.run(
    untilStored(context.queueEvents.told(telling)).pipe(
      Effect.catchAllCause((cause) =>
        Effect.logError("A queued send was accepted but could not be recorded; its lease decides", {
          messageId: row.message_id,
          waMessageId,
          cause
        })
      )
    )
  )
}

/** Meta did not take the send: a retry after the backoff while the validity lasts, else the send given up. */
const refused = (context: OutcomeContext, row: QueuedRow, error: UpstreamError) =>
  Effect.gen(function*() {
    const verdict = verdictOf(error)
    const record = errorRecord(error)
    if (verdict._tag === "Retry") {
      const dueAt = context.now() + backoffMs(row.attempts + 1, error.retryAfterSeconds)
      if (dueAt >= row.expires_at) return yield* giveUp(context, refOf(row), "expired", record)
      context.metrics.queueSend(row.phone_number_id, "retried")
      return yield* untilStored(context.repo.retryLater({
        messageId: row.message_id,
        dueAt,
        error: JSON.stringify(record),
        // Meta's pair rate refused it: only this person waits, as if a whole burst had been spent.
        ...(verdict.pairOnly
          ? {
            pair: {
              phoneNumberId: row.phone_number_id,
              party: row.party,
              tat: dueAt + (PAIR_BURST - 1) * PAIR_INTERVAL_MS
            }
          }
          : {})
      }))
    }
    if (error.code === OPTED_OUT_CODE) {
      // The person stopped the business's marketing messages: later broadcasts skip them.
      yield* Effect.ignore(context.messages.recordOptOuts([{
        _tag: "OptOut",
        wabaId: row.waba_id,
        party: row.party,
        stopped: true,
        at: new Date().toISOString()
      }]))
    }
    yield* giveUp(context, refOf(row), verdict._tag === "Refused" ? "refused" : "outcome_unknown", record)
  })

/** The outcome of one queued send's Graph call, recorded and told (a refusal, rarer, as an effect). */
export const settle = (
  context: SettleContext,
  row: QueuedRow,
  sentAt: number,
  outcome: Either.Either<SendMessageResponse, UpstreamError>
): Promise<void> =>
  Either.isRight(outcome)
    ? accepted(context, row, sentAt, outcome.right)
    : context.run(Effect.catchAllCause(
      refused(context, row, outcome.left),
      (cause) =>
        Effect.logError("A queued send's refusal could not be recorded; its lease decides", {
          messageId: row.message_id,
          cause
        })
    ))

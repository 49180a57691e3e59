/**
 * Cancelling queued sends: DELETE /api/messages/{id} takes one off its number's queue before it goes, a
 * cancelled broadcast all of its own that have not begun. Each record ends `failed` with failureReason
 * `cancelled`, counted and told like every send the queue gives up (Outcomes.ts `giveUp`).
 */
import { Effect } from "effect"
import { Conflict, NotFound } from "../Domain/Errors.js"
import type { Principal } from "../Domain/Principal.js"
import type { MessageRow } from "../Messages/ListQueries.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Metrics } from "../Metrics/Metrics.js"
import { giveUp, type OutcomeContext, refOf } from "./Outcomes.js"
import { QueueEvents } from "./QueueEvents.js"
import { SendQueueRepo } from "./Repo.js"

/** Whether the principal may see the record (its organization; an instance token, its instance). */
const visibleTo = (principal: Principal, row: MessageRow) =>
  row.organization_id === principal.organizationId &&
  (principal.instance === undefined || principal.instance.id === row.instance_id)

/** Given-up sends recorded at once, many in flight: the group writers make few transactions of them. */
const GIVE_UP_CONCURRENCY = 256

export class SendCancellation extends Effect.Service<SendCancellation>()("SendCancellation", {
  effect: Effect.gen(function*() {
    const clock = yield* Effect.clock
    const context: OutcomeContext = {
      repo: yield* SendQueueRepo,
      messages: yield* MessagesRepo,
      queueEvents: yield* QueueEvents,
      metrics: yield* Metrics,
      now: () => clock.unsafeCurrentTimeMillis()
    }

    const cancel = (principal: Principal, messageId: string) =>
      Effect.gen(function*() {
        const row = yield* context.messages.findById(messageId)
        if (row === undefined || !visibleTo(principal, row)) {
          return yield* new NotFound({ message: `Message ${messageId} not found`, error: "not_found" })
        }
        const found = yield* Effect.orDie(context.repo.cancel(messageId))
        if (found._tag === "Sending") {
          return yield* new Conflict({
            message: `Message ${messageId} is being sent; it can no longer be cancelled`,
            error: "send_in_progress"
          })
        }
        if (found._tag === "Absent") {
          return yield* new Conflict({
            message: `Message ${messageId} is not queued (it was sent, or its send has ended); nothing to cancel`,
            error: "not_queued"
          })
        }
        yield* giveUp(context, refOf(found.row), "cancelled", undefined)
        return (yield* context.messages.findById(messageId)) ?? row
      })

    /** Of `messageIds`, those still waiting taken off the queue and given up; answers how many. */
    const cancelAll = (messageIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const taken = yield* Effect.orDie(context.repo.cancelAll(messageIds))
        yield* Effect.forEach(taken, (row) => giveUp(context, refOf(row), "cancelled", undefined), {
          concurrency: GIVE_UP_CONCURRENCY,
          discard: true
        })
        return taken.length
      })

    return { cancel, cancelAll } as const
  }),
  dependencies: [SendQueueRepo.Default, MessagesRepo.Default, QueueEvents.Default]
}) {}

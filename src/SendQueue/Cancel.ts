/**
 * DELETE /api/messages/{id}: a queued send taken off its number's queue before it goes; its record ends
 * `failed` with failureReason `cancelled`, and the outcome is told like every queued send's.
 */
import { Effect } from "effect"
import { Conflict, NotFound } from "../Domain/Errors.js"
import type { Principal } from "../Domain/Principal.js"
import type { MessageRow } from "../Messages/ListQueries.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { refOf } from "./Outcomes.js"
import { QueueEvents } from "./QueueEvents.js"
import { SendQueueRepo } from "./Repo.js"

/** Whether the principal may see the record (its organization; an instance token, its instance). */
const visibleTo = (principal: Principal, row: MessageRow) =>
  row.organization_id === principal.organizationId &&
  (principal.instance === undefined || principal.instance.id === row.instance_id)

export class SendCancellation extends Effect.Service<SendCancellation>()("SendCancellation", {
  effect: Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const messages = yield* MessagesRepo
    const queueEvents = yield* QueueEvents
    const cancel = (principal: Principal, messageId: string) =>
      Effect.gen(function*() {
        const row = yield* messages.findById(messageId)
        if (row === undefined || !visibleTo(principal, row)) {
          return yield* new NotFound({ message: `Message ${messageId} not found`, error: "not_found" })
        }
        const found = yield* Effect.orDie(queue.cancel(messageId))
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
        yield* Effect.orDie(messages.markQueueFailed(messageId, "cancelled"))
        yield* Effect.orDie(
          queueEvents.told(refOf(found.row), { status: "failed", reason: "cancelled", error: undefined }, Effect.void)
        )
        return (yield* messages.findById(messageId)) ?? row
      })
    return { cancel } as const
  }),
  dependencies: [SendQueueRepo.Default, MessagesRepo.Default, QueueEvents.Default]
}) {}

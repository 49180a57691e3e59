/**
 * What the typed client must spell out that the wire leaves to defaults: its requests are the
 * decoded side of the endpoints' schemas, where a default is already applied.
 */
import { Effect } from "effect"
import type { QueuedSend } from "../../src/Messages/Api.js"

/** GET /api/messages's defaults (page 1 of 50), to spread into `urlParams` beside the filters. */
export const messagesFirstPage = { page: 1, limit: 50 } as const

/** A send's defaults (`messaging_product`, `recipient_type`), to spread into a typed message. */
export const individualMessage = { messaging_product: "whatsapp", recipient_type: "individual" } as const

type QueuedAnswer = typeof QueuedSend.Type

const isSent = <A extends { readonly messages: ReadonlyArray<unknown> }>(answer: A | QueuedAnswer): answer is A =>
  "messages" in answer

/**
 * A synchronous send's answer, the upstream's: the typed send answers it or a queued send's 202
 * (issue 32), and a test of a synchronous send dies on the latter.
 */
export const sentNow = <A extends { readonly messages: ReadonlyArray<unknown> }, E, R>(
  send: Effect.Effect<A | QueuedAnswer, E, R>
): Effect.Effect<A, E, R> =>
  Effect.flatMap(
    send,
    (answer) => isSent(answer) ? Effect.succeed(answer) : Effect.dieMessage("the send was queued (202), not sent")
  )

/**
 * One send: Idempotency-Key check, pacing, the record, the upstream call, the outcome recorded.
 *
 * No accepted send goes unrecorded: the `pending` record is committed before the upstream is called
 * (if it cannot be written, nothing is sent), and the send is uninterruptible, so a client that hangs up
 * cannot cut it between the upstream's answer and the update (the upstream call has its own deadline).
 * If that update fails even after retries, the send still answers 200 and the record stays `pending`
 * without upstream id; the error log names both ids so it can be reconciled.
 */
import { Cause, Context, Effect, Exit, Layer, Option, Schedule } from "effect"
import { type Conflict, ServiceUnavailable, type TooManyRequests, type UpstreamFailure } from "../Domain/Errors.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { toHubError } from "../Upstream/toHubError.js"
import { type JsonObject, type SendMessageResponse, Upstream } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"
import { type Claim, IdempotencyKeys, type KeyRef, requestHash } from "./Idempotency.js"
import { type SendMessageRequest, toUpstreamBody } from "./MessageSchemas.js"
import { Pacing } from "./Pacing.js"
import { MessagesRepo } from "./Repo.js"

export type SendOutcome =
  | { readonly _tag: "Sent"; readonly response: SendMessageResponse }
  | Extract<Claim, { readonly _tag: "Replay" }>

type SendError = Conflict | ServiceUnavailable | TooManyRequests | UpstreamFailure

export class MessageSender extends Context.Tag("MessageSender")<MessageSender, {
  readonly send: (
    instance: InstanceRef,
    request: SendMessageRequest,
    idempotencyKey: string | undefined
  ) => Effect.Effect<SendOutcome, SendError>
}>() {}

/** The upstream error as kept in the record's `error` column. */
const errorRecord = (e: UpstreamError): JsonObject => ({
  kind: e.kind,
  status: e.status,
  code: e.code,
  message: e.message,
  ...(e.subcode === undefined ? {} : { error_subcode: e.subcode }),
  ...(e.fbtraceId === undefined ? {} : { fbtrace_id: e.fbtraceId }),
  ...(e.details === undefined ? {} : { details: e.details })
})

/**
 * Answers an Idempotency-Key keeps: the success, the upstream's refusals (the same body would be
 * refused again) and sends whose outcome is unknown (a timeout or broken connection: the message may
 * have gone, so a retry must not send it twice). Throttling, upstream 5xx, and failures before the
 * upstream was called release the key instead, so the client's retry is processed afresh.
 */
const keepsAnswer = (e: SendError) =>
  e._tag === "UpstreamFailure" &&
  ((e.status < 500 && e.error === "upstream_error") || e.error === "upstream_timeout" || e.error === "upstream_unreachable")

const errorBody = (e: SendError) => ({
  statusCode: e.statusCode,
  message: e.message,
  ...(e.error === undefined ? {} : { error: e.error }),
  ...(e.details === undefined ? {} : { details: e.details })
})

/** Record updates are retried at once: SQLite already waits out locks (busy_timeout), so a delay adds nothing. */
const updateRetry = Schedule.recurs(2)

export const MessageSenderLive = Layer.effect(
  MessageSender,
  Effect.gen(function*() {
    const repo = yield* MessagesRepo
    const keys = yield* IdempotencyKeys
    const pacing = yield* Pacing
    const access = yield* InstanceAccess
    const upstream = yield* Upstream

    const recordFailure = (messageId: string, e: UpstreamError) =>
      (e.kind === "graph" ? repo.markRefused(messageId, errorRecord(e)) : repo.noteError(messageId, errorRecord(e))).pipe(
        Effect.retry(updateRetry),
        Effect.catchAll((cause) => Effect.logError("Could not record the upstream's refusal of a send", { messageId, cause }))
      )

    const recordAcceptance = (messageId: string, response: SendMessageResponse) => {
      const waMessageId = response.messages[0]?.id
      if (waMessageId === undefined) {
        return Effect.logError("The upstream accepted a send without a message id; its record stays pending", { messageId })
      }
      return repo.markAccepted(messageId, waMessageId).pipe(
        Effect.retry(updateRetry),
        Effect.catchAll((cause) =>
          Effect.logError("The upstream accepted a send the hub could not mark accepted; the record stays pending", {
            messageId,
            waMessageId,
            cause
          })
        )
      )
    }

    const deliver = (instance: InstanceRef, request: SendMessageRequest, body: JsonObject) =>
      Effect.gen(function*() {
        yield* pacing.take(instance.phoneNumberId)
        const target = yield* access.target(instance)
        const record = yield* repo.createOutbound({
          organizationId: instance.organizationId,
          instanceId: instance.id,
          to: request.to,
          type: request.type
        }).pipe(
          Effect.tapError((cause) => Effect.logError("Could not record a send; nothing was sent", cause)),
          Effect.mapError(() =>
            new ServiceUnavailable({ message: "The message could not be recorded, so it was not sent", error: "storage_unavailable" })
          )
        )
        const response = yield* upstream.sendMessage(target, body).pipe(
          Effect.tapError((e) => recordFailure(record.id, e)),
          Effect.mapError(toHubError)
        )
        yield* recordAcceptance(record.id, response)
        return response
      })

    const settle = (ref: KeyRef) => (exit: Exit.Exit<SendMessageResponse, SendError>) =>
      Exit.match(exit, {
        onSuccess: (response) => keys.complete(ref, 200, response),
        onFailure: (cause) => {
          const failure = Cause.failureOption(cause)
          return Option.isSome(failure) && keepsAnswer(failure.value)
            ? keys.complete(ref, failure.value.statusCode, errorBody(failure.value))
            : keys.release(ref)
        }
      })

    return MessageSender.of({
      send: (instance, request, idempotencyKey) =>
        Effect.gen(function*() {
          const body = toUpstreamBody(request)
          if (idempotencyKey === undefined) {
            return { _tag: "Sent", response: yield* deliver(instance, request, body) } as const
          }
          const ref: KeyRef = { organizationId: instance.organizationId, key: idempotencyKey }
          const claim = yield* keys.begin({ ...ref, instanceId: instance.id, requestHash: requestHash(instance.id, body) })
          if (claim._tag === "Replay") return claim
          const response = yield* deliver(instance, request, body).pipe(Effect.onExit(settle(ref)))
          return { _tag: "Sent", response } as const
        }).pipe(
          // A client hanging up does not interrupt a send (no fiber fork needed for that).
          Effect.uninterruptible
        )
    })
  })
)

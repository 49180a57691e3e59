/**
 * A queued send's business steps (issue 32): `enqueue` puts it on the disk and answers 202 (its record
 * `pending` and its queue row in one transaction), `cancel` takes it out before it goes. The drainer
 * (SendQueue/Drainer.ts) makes it. Under an Idempotency-Key a repeat gets the first 202 again (the same
 * mechanism and window as synchronous sends: Messages/Idempotency.ts).
 */
import { Cause, Duration, Effect, Exit, Option } from "effect"
import { HubConfig } from "../Config.js"
import { BadRequest, Conflict, errorBody, NotFound, ServiceUnavailable, TooManyRequests } from "../Domain/Errors.js"
import { newId } from "../Domain/Ids.js"
import type { InstanceRef, Principal } from "../Domain/Principal.js"
import { type Claim, IdempotencyKeys, IdempotencyKeysLive, type KeyRef, requestHash } from "../Messages/Idempotency.js"
import type { MessageRow } from "../Messages/ListQueries.js"
import { type SendMessageRequest, toUpstreamBody } from "../Messages/MessageSchemas.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { sendEndpoint } from "../Messages/Send.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import { SendQueueDrainer } from "./Drainer.js"
import { QueueEvents } from "./QueueEvents.js"
import { SendQueueRepo } from "./Repo.js"
import { priorityRank, queueCapacity, retryAfterForDepth, SEND_AT_MAX_AHEAD_MS } from "./Rules.js"
import { Throughput } from "./Throughput.js"

/** A queued send's 202 answer (Messages/Api.ts QueuedSend). */
interface QueuedAnswer {
  readonly id: string
  readonly status: "pending"
  readonly send_at: string
  readonly expires_at: string
}

export type QueueOutcome =
  | { readonly _tag: "Queued"; readonly answer: QueuedAnswer }
  | Extract<Claim, { readonly _tag: "Replay" }>

/** A `send_at` this far in the past is a clock's skew, taken as now; earlier is a mistake (400). */
const PAST_TOLERANCE_MS = 5 * 60_000

/** A number's depth is read from the database at most this often; the sends queued here since are added. */
const DEPTH_TTL_MS = 1_000

/** Whether the request asks to be queued: `Prefer: respond-async` or any of the queue's options. */
export const wantsQueue = (request: SendMessageRequest, prefer: string | undefined): boolean =>
  request.send_at !== undefined || request.validity !== undefined || request.priority !== undefined ||
  (prefer !== undefined && /(^|[,;\s])respond-async($|[,;\s])/i.test(prefer))

const invalid = (field: string, message: string) =>
  new BadRequest({
    message: `Invalid request: ${field}: ${message}`,
    error: "validation_failed",
    details: [{ field, message }]
  })

export class QueuedSends extends Effect.Service<QueuedSends>()("QueuedSends", {
  effect: Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const messages = yield* MessagesRepo
    const batcher = yield* WriteBatcher
    const keys = yield* IdempotencyKeys
    const drainer = yield* SendQueueDrainer
    const throughput = yield* Throughput
    const queueEvents = yield* QueueEvents
    const config = yield* HubConfig
    const clock = yield* Effect.clock
    const depths = new Map<string, { depth: number; readAt: number }>()

    /** The number's queue depth: read at most once a second, counting what this replica queued since. */
    const depthOf = (phoneNumberId: string, now: number) =>
      Effect.suspend(() => {
        const known = depths.get(phoneNumberId)
        if (known !== undefined && now - known.readAt < DEPTH_TTL_MS) return Effect.succeed(known)
        return Effect.map(queue.depthOf(phoneNumberId), (depth) => {
          const read = { depth, readAt: now }
          depths.set(phoneNumberId, read)
          return read
        })
      })

    const windowOf = (request: SendMessageRequest, now: number) => {
      const sendAt = request.send_at === undefined ? now : Date.parse(request.send_at)
      if (sendAt < now - PAST_TOLERANCE_MS) {
        return Effect.fail(invalid("send_at", "is in the past; leave it out to send as soon as possible"))
      }
      if (sendAt > now + SEND_AT_MAX_AHEAD_MS) return Effect.fail(invalid("send_at", "must be at most 35 days ahead"))
      const validityMs = request.validity === undefined
        ? Duration.toMillis(config.queueValidity)
        : request.validity * 1000
      const from = Math.max(sendAt, now)
      return Effect.succeed({ sendAt: from, expiresAt: from + validityMs })
    }

    const enqueue = (instance: InstanceRef, request: SendMessageRequest) =>
      Effect.gen(function*() {
        const now = clock.unsafeCurrentTimeMillis()
        const window = yield* windowOf(request, now)
        const rate = throughput.rateNow(instance.phoneNumberId)
        const capacity = queueCapacity(rate, config.queueMaxHours)
        const known = yield* Effect.orDie(depthOf(instance.phoneNumberId, now))
        if (known.depth >= capacity) {
          return yield* new TooManyRequests({
            message: `The queue of phone number ${instance.phoneNumberId} is full: it holds ${config.queueMaxHours} ` +
              `hours of its throughput (${capacity} sends at ${rate} a second); retry later`,
            error: "queue_full",
            retryAfterSeconds: retryAfterForDepth(known.depth, capacity, rate)
          })
        }
        const chosen = sendEndpoint(messages, instance, request)
        const endpoint = typeof chosen === "string" ? chosen : yield* chosen
        const id = newId("msg")
        const priority = request.priority ?? "transactional"
        const category = request.forwarded?.category
        const written = yield* Effect.exit(batcher.run(Effect.zipRight(
          messages.insertQueued({
            id,
            organizationId: instance.organizationId,
            instanceId: instance.id,
            to: request.to ?? request.recipient ?? "",
            userId: request.recipient,
            type: request.type,
            category: typeof category === "string" ? category : undefined,
            endpoint,
            sendAt: new Date(window.sendAt).toISOString(),
            expiresAt: new Date(window.expiresAt).toISOString(),
            priority
          }),
          queue.insert({
            messageId: id,
            organizationId: instance.organizationId,
            instanceId: instance.id,
            wabaId: instance.wabaId,
            phoneNumberId: instance.phoneNumberId,
            party: request.to ?? request.recipient ?? "",
            priority: priorityRank[priority],
            body: JSON.stringify(toUpstreamBody(request)),
            endpoint,
            sendAt: window.sendAt,
            expiresAt: window.expiresAt
          })
        )))
        if (Exit.isFailure(written)) {
          yield* Effect.logError("Could not queue a send; nothing was queued", written.cause)
          return yield* new ServiceUnavailable({
            message: "The send could not be queued, so it will not be sent; retry shortly",
            error: "storage_unavailable",
            retryAfterSeconds: 1
          })
        }
        known.depth++
        drainer.wake()
        return {
          id,
          status: "pending",
          send_at: new Date(window.sendAt).toISOString(),
          expires_at: new Date(window.expiresAt).toISOString()
        } satisfies QueuedAnswer
      })

    /** The first request with the key queues and keeps its 202; a repeat (same body) gets that 202 again. */
    const enqueueOnce = (instance: InstanceRef, request: SendMessageRequest, idempotencyKey: string) => {
      const ref: KeyRef = { organizationId: instance.organizationId, instanceId: instance.id, key: idempotencyKey }
      // The queue's options are part of the request: the same message at another time is another request.
      const hashed = {
        body: toUpstreamBody(request),
        queue: {
          send_at: request.send_at ?? null,
          validity: request.validity ?? null,
          priority: request.priority ?? null
        }
      }
      return Effect.gen(function*() {
        const claim = yield* keys.begin({ ...ref, requestHash: requestHash(instance.id, hashed) })
        if (claim._tag === "Replay") return claim
        const queued = yield* enqueue(instance, request).pipe(
          Effect.onExit((exit) =>
            Exit.match(exit, {
              onSuccess: (answer) => keys.complete(ref, 202, answer),
              onFailure: (cause) => {
                const failure = Cause.failureOption(cause)
                // A refusal of the request itself would be refused again: kept. Full or unavailable: retried afresh.
                return Option.isSome(failure) && failure.value._tag === "BadRequest"
                  ? keys.complete(ref, failure.value.statusCode, errorBody(failure.value))
                  : keys.release(ref)
              }
            })
          )
        )
        return { _tag: "Queued", answer: queued } as const
      }).pipe(Effect.uninterruptible)
    }

    /** Whether the principal may see the record (its organization; an instance token, its instance). */
    const visibleTo = (principal: Principal, row: MessageRow) =>
      row.organization_id === principal.organizationId &&
      (principal.instance === undefined || principal.instance.id === row.instance_id)

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
        const taken = found.row
        yield* Effect.orDie(queueEvents.told(
          {
            messageId,
            organizationId: taken.organization_id,
            instanceId: taken.instance_id,
            phoneNumberId: taken.phone_number_id,
            to: taken.party,
            attempts: taken.attempts
          },
          { status: "failed", reason: "cancelled", error: undefined },
          Effect.void
        ))
        const cancelled = yield* messages.findById(messageId)
        return cancelled ?? row
      })

    return { enqueue, enqueueOnce, cancel } as const
  }),
  dependencies: [
    SendQueueRepo.Default,
    SendQueueDrainer.Default,
    Throughput.Default,
    QueueEvents.Default,
    MessagesRepo.Default,
    IdempotencyKeysLive
  ]
}) {}

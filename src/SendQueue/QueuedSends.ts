/**
 * A queued send's business steps (issue 32): `enqueue` puts it on the disk and answers 202 (its record
 * `pending` and its queue row in one transaction); SendQueue/Cancel.ts takes one out before it goes. The drainer
 * (SendQueue/Drainer.ts) makes it. Under an Idempotency-Key a repeat gets the first 202 again (the same
 * mechanism and window as synchronous sends: Messages/Idempotency.ts).
 */
import { Cause, Duration, Effect, Exit, Option } from "effect"
import { HubConfig } from "../Config.js"
import {
  BadRequest,
  errorBody,
  type ServiceUnavailable,
  storageUnavailable,
  TooManyRequests
} from "../Domain/Errors.js"
import { newId } from "../Domain/Ids.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { type Claim, IdempotencyKeys, IdempotencyKeysLive, type KeyRef, requestHash } from "../Messages/Idempotency.js"
import { type SendMessageRequest, toUpstreamBody } from "../Messages/MessageSchemas.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { sendEndpoint } from "../Messages/Send.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import type { SendEndpoint } from "../Upstream/Upstream.js"
import { SendQueueDrainer } from "./Drainer.js"
import { SendQueueRepo } from "./Repo.js"
import { priorityRank, queueCapacity, retryAfterForDepth, SEND_AT_MAX_AHEAD_MS } from "./Rules.js"

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

/** When a queued send may go and until when it may wait, or why its `send_at` is refused. */
const windowOf = (queueValidity: Duration.Duration, request: SendMessageRequest, now: number) => {
  const sendAt = request.send_at === undefined ? now : Date.parse(request.send_at)
  if (sendAt < now - PAST_TOLERANCE_MS) {
    return Effect.fail(invalid("send_at", "is in the past; leave it out to send as soon as possible"))
  }
  if (sendAt > now + SEND_AT_MAX_AHEAD_MS) return Effect.fail(invalid("send_at", "must be at most 35 days ahead"))
  const validityMs = request.validity === undefined
    ? Duration.toMillis(queueValidity)
    : request.validity * 1000
  const from = Math.max(sendAt, now)
  return Effect.succeed({ sendAt: from, expiresAt: from + validityMs })
}

/** Each send's endpoint, a template's category read once per template of the batch. */
const endpointsOf = (messages: MessagesRepo, instance: InstanceRef, requests: ReadonlyArray<SendMessageRequest>) =>
  Effect.gen(function*() {
    const byTemplate = new Map<string, SendEndpoint>()
    const endpoints: Array<SendEndpoint> = []
    for (const request of requests) {
      const chosen = sendEndpoint(messages, instance, request)
      if (typeof chosen === "string") {
        endpoints.push(chosen)
        continue
      }
      const key = request.type === "template"
        ? `${request.via ?? ""} ${request.template.name} ${request.template.language.code}`
        : ""
      const known = byTemplate.get(key) ?? (yield* chosen)
      byTemplate.set(key, known)
      endpoints.push(known)
    }
    return endpoints
  })

/** One send's record and queue row (inside the caller's transaction). */
const insertSend = (
  stores: { readonly queue: SendQueueRepo; readonly messages: MessagesRepo },
  instance: InstanceRef,
  send: {
    readonly request: SendMessageRequest
    readonly window: { readonly sendAt: number; readonly expiresAt: number }
    readonly answer: QueuedAnswer
    readonly endpoint: SendEndpoint
  }
) => {
  const { request, window, answer, endpoint } = send
  const priority = request.priority ?? "transactional"
  const category = request.forwarded?.category
  const party = request.to ?? request.recipient ?? ""
  return Effect.zipRight(
    stores.messages.insertQueued({
      id: answer.id,
      organizationId: instance.organizationId,
      instanceId: instance.id,
      to: party,
      userId: request.recipient,
      type: request.type,
      category: typeof category === "string" ? category : undefined,
      endpoint,
      sendAt: answer.send_at,
      expiresAt: answer.expires_at,
      priority
    }),
    stores.queue.insert({
      messageId: answer.id,
      organizationId: instance.organizationId,
      instanceId: instance.id,
      wabaId: instance.wabaId,
      phoneNumberId: instance.phoneNumberId,
      party,
      priority: priorityRank[priority],
      body: JSON.stringify(toUpstreamBody(request)),
      endpoint,
      sendAt: window.sendAt,
      expiresAt: window.expiresAt
    })
  )
}

/**
 * Keeps a keyed queued send's 202 for its repeats; a refusal of the request itself too (it would be refused
 * again); a full queue or an unavailable database frees the key, so the same request may be retried with it.
 */
const keepAnswer =
  (keys: IdempotencyKeys["Type"], ref: KeyRef) =>
  (exit: Exit.Exit<QueuedAnswer, BadRequest | TooManyRequests | ServiceUnavailable>) =>
    Exit.match(exit, {
      onSuccess: (answer) => keys.complete(ref, 202, answer),
      onFailure: (cause) => {
        const failure = Cause.failureOption(cause)
        return Option.isSome(failure) && failure.value._tag === "BadRequest"
          ? keys.complete(ref, failure.value.statusCode, errorBody(failure.value))
          : keys.release(ref)
      }
    })

export class QueuedSends extends Effect.Service<QueuedSends>()("QueuedSends", {
  effect: Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const messages = yield* MessagesRepo
    const batcher = yield* WriteBatcher
    const keys = yield* IdempotencyKeys
    const drainer = yield* SendQueueDrainer
    const throughput = yield* Throughput
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

    /**
     * Queues sends of one instance together: their records and queue rows, with `alongside` (what the
     * caller writes of them: a broadcast's recipients), in one transaction; the number's queue must
     * hold them all. Answers each send's 202, in order.
     */
    const enqueueMany = <E>(
      instance: InstanceRef,
      requests: ReadonlyArray<SendMessageRequest>,
      alongside: (answers: ReadonlyArray<QueuedAnswer>) => Effect.Effect<void, E> = () => Effect.void
    ) =>
      Effect.gen(function*() {
        const now = clock.unsafeCurrentTimeMillis()
        const windows = yield* Effect.forEach(requests, (request) => windowOf(config.queueValidity, request, now))
        const rate = throughput.rateNow(instance.phoneNumberId)
        const capacity = queueCapacity(rate, config.queueMaxHours)
        const known = yield* Effect.orDie(depthOf(instance.phoneNumberId, now))
        if (known.depth + requests.length > capacity) {
          return yield* new TooManyRequests({
            message: `The queue of phone number ${instance.phoneNumberId} is full: it holds ${config.queueMaxHours} ` +
              `hours of its throughput (${capacity} sends at ${rate} a second); retry later`,
            error: "queue_full",
            retryAfterSeconds: retryAfterForDepth(known.depth + requests.length - 1, capacity, rate)
          })
        }
        const endpoints = yield* endpointsOf(messages, instance, requests)
        const sends = requests.map((request, i) => {
          const window = windows[i] ?? { sendAt: now, expiresAt: now }
          const answer: QueuedAnswer = {
            id: newId("msg"),
            status: "pending",
            send_at: new Date(window.sendAt).toISOString(),
            expires_at: new Date(window.expiresAt).toISOString()
          }
          return { request, window, answer, endpoint: endpoints[i] ?? "messages" }
        })
        const written = yield* Effect.exit(batcher.run(Effect.gen(function*() {
          for (const send of sends) yield* insertSend({ queue, messages }, instance, send)
          yield* alongside(sends.map((send) => send.answer))
        })))
        if (Exit.isFailure(written)) {
          yield* Effect.logError("Could not queue sends; nothing was queued", written.cause)
          return yield* storageUnavailable("The send could not be queued, so it will not be sent; retry shortly")
        }
        known.depth += sends.length
        // A send due later needs no round now: the drainer's next round comes by its due time.
        if (sends.some((send) => send.window.sendAt <= now)) drainer.wake()
        return sends.map((send) => send.answer)
      })

    const enqueue = (instance: InstanceRef, request: SendMessageRequest) =>
      Effect.flatMap(
        enqueueMany(instance, [request]),
        (answers) =>
          answers[0] === undefined ? Effect.dieMessage("no answer for the queued send") : Effect.succeed(answers[0])
      )

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
        const queued = yield* enqueue(instance, request).pipe(Effect.onExit(keepAnswer(keys, ref)))
        return { _tag: "Queued", answer: queued } as const
      }).pipe(Effect.uninterruptible)
    }

    return { enqueue, enqueueMany, enqueueOnce } as const
  }),
  dependencies: [
    SendQueueRepo.Default,
    SendQueueDrainer.Default,
    Throughput.Default,
    MessagesRepo.Default,
    IdempotencyKeysLive
  ]
}) {}

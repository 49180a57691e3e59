/**
 * A queued send's business steps (issue 32): `enqueueNow` (`enqueueMany` for a broadcast's sends) puts it
 * on the disk and answers 202 (its record `pending` and its queue row committed); SendQueue/Cancel.ts takes
 * one out before it goes. The drainer (SendQueue/Drainer.ts) makes it. Under an Idempotency-Key a repeat
 * gets the first 202 again (the same mechanism and window as synchronous sends: Messages/Idempotency.ts).
 *
 * `enqueueNow` is plain async code, not an effect, as the synchronous send's core is (Messages/Send.ts):
 * its checks answer from memory (the window, the number's depth: SendQueue/Depths.ts), and the write goes
 * through a group writer of the WriteBatcher, so the sends of concurrent requests share one statement per
 * table and one commit. As an effect with a savepoint and two one-row statements per send, a 202 cost
 * 970-1,220 µs of the hub's CPU in `bench.ts --quick --scenarios queue`; this way 340-440 µs (over 20,000
 * 202s: 522-592 against 212-238 µs), alternated on the same loaded machine (PERFORMANCE.md, "The 202 path
 * grouped").
 */
import { type SqlError } from "@effect/sql"
import { Cause, Duration, Effect, Either, Exit, Option, Runtime } from "effect"
import { HubConfig } from "../Config.js"
import {
  type BadRequest,
  type Conflict,
  errorBody,
  invalidField,
  type ServiceUnavailable,
  storageUnavailable,
  TooManyRequests
} from "../Domain/Errors.js"
import { newId } from "../Domain/Ids.js"
import type { RunInRequest } from "../Domain/PlainRoute.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { type Claim, IdempotencyKeys, IdempotencyKeysLive, type KeyRef, requestHash } from "../Messages/Idempotency.js"
import { type SendMessageRequest, toUpstreamBody } from "../Messages/MessageSchemas.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { outboundRecordOf, sendEndpoint } from "../Messages/Send.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { WriteBatcher, written } from "../Sql/WriteBatcher.js"
import type { SendEndpoint } from "../Upstream/Upstream.js"
import { type Admission, makeQueueDepths } from "./Depths.js"
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

type QueueError = BadRequest | TooManyRequests | ServiceUnavailable

/** When a queued send may go and until when it may wait (epoch ms). */
interface Window {
  readonly sendAt: number
  readonly expiresAt: number
}

/** A send ready to be written: its record's and queue row's values, and its 202. */
interface QueuedWrite {
  readonly instance: InstanceRef
  readonly request: SendMessageRequest
  readonly window: Window
  readonly endpoint: SendEndpoint
  readonly answer: QueuedAnswer
}

/** A `send_at` this far in the past is a clock's skew, taken as now; earlier is a mistake (400). */
const PAST_TOLERANCE_MS = 5 * 60_000

/** Whether the request asks to be queued: `Prefer: respond-async` or any of the queue's options. */
export const wantsQueue = (request: SendMessageRequest, prefer: string | undefined): boolean =>
  request.send_at !== undefined || request.validity !== undefined || request.priority !== undefined ||
  (prefer !== undefined && /(^|[,;\s])respond-async($|[,;\s])/i.test(prefer))

const notQueued = storageUnavailable("The send could not be queued, so it will not be sent; retry shortly")

/** When a queued send may go and until when it may wait, or why its `send_at` is refused. */
const windowOf = (
  queueValidity: Duration.Duration,
  request: SendMessageRequest,
  now: number
): Either.Either<Window, BadRequest> => {
  const sendAt = request.send_at === undefined ? now : Date.parse(request.send_at)
  if (sendAt < now - PAST_TOLERANCE_MS) {
    return Either.left(invalidField("send_at", "is in the past; leave it out to send as soon as possible"))
  }
  if (sendAt > now + SEND_AT_MAX_AHEAD_MS) return Either.left(invalidField("send_at", "must be at most 35 days ahead"))
  const validityMs = request.validity === undefined
    ? Duration.toMillis(queueValidity)
    : request.validity * 1000
  const from = Math.max(sendAt, now)
  return Either.right({ sendAt: from, expiresAt: from + validityMs })
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

/** A send about to be written, with its new id and its 202. */
const prepared = (
  instance: InstanceRef,
  request: SendMessageRequest,
  window: Window,
  endpoint: SendEndpoint
): QueuedWrite => ({
  instance,
  request,
  window,
  endpoint,
  answer: {
    id: newId("msg"),
    status: "pending",
    send_at: new Date(window.sendAt).toISOString(),
    expires_at: new Date(window.expiresAt).toISOString()
  }
})

/** Sends' records and queue rows, many per statement (inside the caller's transaction). */
const writeSends = (
  stores: { readonly queue: SendQueueRepo; readonly messages: MessagesRepo },
  sends: ReadonlyArray<QueuedWrite>
): Effect.Effect<void, SqlError.SqlError> =>
  Effect.zipRight(
    stores.messages.insertQueued(sends.map(({ answer, endpoint, instance, request }) => ({
      ...outboundRecordOf(instance, request, endpoint),
      id: answer.id,
      sendAt: answer.send_at,
      expiresAt: answer.expires_at,
      priority: request.priority ?? "transactional"
    }))),
    stores.queue.insert(sends.map(({ answer, endpoint, instance, request, window }) => ({
      messageId: answer.id,
      organizationId: instance.organizationId,
      instanceId: instance.id,
      wabaId: instance.wabaId,
      phoneNumberId: instance.phoneNumberId,
      party: request.to ?? request.recipient ?? "",
      priority: priorityRank[request.priority ?? "transactional"],
      body: JSON.stringify(toUpstreamBody(request)),
      endpoint,
      sendAt: window.sendAt,
      expiresAt: window.expiresAt
    })))
  )

/**
 * Keeps a keyed queued send's 202 for its repeats; a refusal of the request itself too (it would be refused
 * again); a full queue or an unavailable database frees the key, so the same request may be retried with it.
 */
const keepAnswer = (keys: IdempotencyKeys["Type"], ref: KeyRef) => (exit: Exit.Exit<QueuedAnswer, QueueError>) =>
  Exit.match(exit, {
    onSuccess: (answer) => keys.complete(ref, 202, answer),
    onFailure: (cause) => {
      const failure = Cause.failureOption(cause)
      return Option.isSome(failure) && failure.value._tag === "BadRequest"
        ? keys.complete(ref, failure.value.statusCode, errorBody(failure.value))
        : keys.release(ref)
    }
  })

/** Why the number's queue takes none of `count` more sends, if it does not. */
const refusalOf = (
  instance: InstanceRef,
  admission: Admission,
  rate: number,
  capacity: number,
  hours: number
): QueueError | undefined => {
  switch (admission._tag) {
    case "Admitted":
      return undefined
    case "Unavailable":
      return notQueued
    case "Full":
      return new TooManyRequests({
        message: `The queue of phone number ${instance.phoneNumberId} is full: it holds ${hours} ` +
          `hours of its throughput (${capacity} sends at ${rate} a second); retry later`,
        error: "queue_full",
        retryAfterSeconds: retryAfterForDepth(admission.depth - 1, capacity, rate)
      })
  }
}

/** One queued send as a plain promise (QueuedSends' `enqueueNow`). */
type EnqueueNow = (
  instance: InstanceRef,
  request: SendMessageRequest,
  inRequest: RunInRequest
) => Promise<Either.Either<QueuedAnswer, QueueError>>

/**
 * A queued send under an Idempotency-Key: the first request with the key queues (`enqueueNow`, its effects
 * run in this fiber's context, so its logs are the request's) and keeps its 202; a repeat (same body)
 * gets that 202 again.
 */
const enqueueOnce = (
  keys: IdempotencyKeys["Type"],
  enqueueNow: EnqueueNow,
  instance: InstanceRef,
  request: SendMessageRequest,
  idempotencyKey: string
): Effect.Effect<QueueOutcome, QueueError | Conflict | ServiceUnavailable> => {
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
  const enqueued = Effect.flatMap(
    Effect.runtime<never>(),
    (runtime) =>
      Effect.flatMap(
        Effect.promise(() => enqueueNow(instance, request, Runtime.runPromise(runtime))),
        (outcome) => outcome
      )
  )
  return Effect.gen(function*() {
    const claim = yield* keys.begin({ ...ref, requestHash: requestHash(instance.id, hashed) })
    if (claim._tag === "Replay") return claim
    const queued = yield* enqueued.pipe(Effect.onExit(keepAnswer(keys, ref)))
    return { _tag: "Queued", answer: queued } as const
  }).pipe(Effect.uninterruptible)
}

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
    const runPromiseExit = Runtime.runPromiseExit(yield* Effect.runtime<never>())
    const depths = makeQueueDepths(
      (phoneNumberId) =>
        runPromiseExit(
          queue.depthOf(phoneNumberId).pipe(
            Effect.tapErrorCause((cause) => Effect.logWarning("Could not read a number's queue depth", cause))
          )
        ),
      () => clock.unsafeCurrentTimeMillis()
    )
    // Concurrent requests' sends in one statement per table, in the next shared transaction.
    const writer = batcher.groupNow((sends: ReadonlyArray<QueuedWrite>) =>
      Effect.as(writeSends({ queue, messages }, sends), sends.map(() => undefined))
    )

    /** Admits `count` sends of the instance's number, or answers why not (see SendQueue/Depths.ts). */
    const admit = (instance: InstanceRef, count: number) => {
      const rate = throughput.rateNow(instance.phoneNumberId)
      const capacity = queueCapacity(rate, config.queueMaxHours)
      const refusal = (admission: Admission) => refusalOf(instance, admission, rate, capacity, config.queueMaxHours)
      const admission = depths.admit(instance.phoneNumberId, count, capacity)
      return admission instanceof Promise ? admission.then(refusal) : refusal(admission)
    }

    /** Admitted sends' write ended: counted in the number's depth if committed, the drainer woken for those due now. */
    const afterWrite = (
      instance: InstanceRef,
      windows: ReadonlyArray<Window>,
      committed: boolean,
      now: number
    ) => {
      depths.settle(instance.phoneNumberId, windows.length, committed)
      // A send due later needs no round now: the drainer's next round comes by its due time.
      if (committed && windows.some((window) => window.sendAt <= now)) drainer.wake()
    }

    /** One queued send, as a plain promise of its 202 or its refusal (see the top of this file). */
    const enqueueNow = async (
      instance: InstanceRef,
      request: SendMessageRequest,
      inRequest: RunInRequest
    ): Promise<Either.Either<QueuedAnswer, QueueError>> => {
      const now = clock.unsafeCurrentTimeMillis()
      const window = windowOf(config.queueValidity, request, now)
      if (Either.isLeft(window)) return Either.left(window.left)
      const admitted = admit(instance, 1)
      const refused = admitted instanceof Promise ? await admitted : admitted
      if (refused !== undefined) return Either.left(refused)
      let outcome: Exit.Exit<void, SqlError.SqlError> | undefined
      try {
        const chosen = sendEndpoint(messages, instance, request)
        const send = prepared(
          instance,
          request,
          window.right,
          typeof chosen === "string" ? chosen : await inRequest(chosen)
        )
        outcome = await written(writer, send)
        if (Exit.isSuccess(outcome)) return Either.right(send.answer)
        await inRequest(Effect.logError("Could not queue a send; nothing was queued", outcome.cause))
        return Either.left(notQueued)
      } finally {
        // Settled however it ended (a defect before the write frees the admitted place too).
        afterWrite(instance, [window.right], outcome !== undefined && Exit.isSuccess(outcome), now)
      }
    }

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
        const refused = yield* Effect.promise(() => Promise.resolve(admit(instance, requests.length)))
        if (refused !== undefined) return yield* refused
        const write = Effect.gen(function*() {
          const endpoints = yield* endpointsOf(messages, instance, requests)
          const sends = requests.map((request, i) =>
            prepared(instance, request, windows[i] ?? { sendAt: now, expiresAt: now }, endpoints[i] ?? "messages")
          )
          const outcome = yield* Effect.exit(batcher.run(Effect.zipRight(
            writeSends({ queue, messages }, sends),
            alongside(sends.map((send) => send.answer))
          )))
          if (Exit.isSuccess(outcome)) return sends.map((send) => send.answer)
          yield* Effect.logError("Could not queue sends; nothing was queued", outcome.cause)
          return yield* notQueued
        })
        // The admitted places are settled however this ends (an interrupted request included).
        return yield* Effect.onExit(write, (exit) =>
          Effect.sync(() => afterWrite(instance, windows, Exit.isSuccess(exit), now)))
      })

    return {
      enqueueNow,
      enqueueMany,
      enqueueOnce: (instance: InstanceRef, request: SendMessageRequest, idempotencyKey: string) =>
        enqueueOnce(keys, enqueueNow, instance, request, idempotencyKey)
    } as const
  }),
  dependencies: [
    SendQueueRepo.Default,
    SendQueueDrainer.Default,
    Throughput.Default,
    MessagesRepo.Default,
    IdempotencyKeysLive
  ]
}) {}

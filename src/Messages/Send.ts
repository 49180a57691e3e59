/**
 * One send: Idempotency-Key check, pacing, the record, the upstream call, the outcome recorded (Messages/SendRecords.ts).
 *
 * No accepted send goes unrecorded: the `pending` record is committed before the upstream is called
 * (if it cannot be written, nothing is sent), and a begun send runs to its end, so a client that hangs
 * up cannot cut it between the upstream's answer and the update (the upstream call has its own
 * deadline), and the hub stops only after its sends in flight have ended. If that update fails even
 * after retries, the send still answers 200 and the record stays `pending` without upstream id; the
 * error log names both ids so it can be reconciled.
 *
 * The send itself (`deliver`) is plain async code, not an effect: it is the path of nearly every
 * message, and as an effect its fiber and combinators cost about 40 % of the hub's CPU per send
 * (measured with scripts/bench.ts: 340-410 µs a send against 150-220). Its steps are the same
 * services' plain entries (pacing, the cached target, the group writers, the Upstream's send); a send
 * under an Idempotency-Key (`sendOnce`, an effect: it reads and writes its key) runs that same code.
 */
import { Cause, type Clock, Effect, Either, Exit, Option, Runtime, type Tracer } from "effect"
import { HubConfig } from "../Config.js"
import {
  type Conflict,
  errorBody,
  ServiceUnavailable,
  storageUnavailable,
  type TooManyRequests,
  type UpstreamFailure
} from "../Domain/Errors.js"
import { type JsonObject } from "../Domain/Json.js"
import type { RunInRequest } from "../Domain/PlainRoute.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { Metrics, type SendResult } from "../Metrics/Metrics.js"
import { Throughput } from "../PhoneNumbers/Throughput.js"
import { annotate, endSpan, HubTracer, startSpan } from "../Tracing/Spans.js"
import { toHubError } from "../Upstream/toHubError.js"
import { type SendEndpoint, type SendMessageResponse, Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import { type Claim, IdempotencyKeys, IdempotencyKeysLive, type KeyRef, requestHash } from "./Idempotency.js"
import { type InFlightGate, makeInFlightGate } from "./InFlightGate.js"
import { type SendMessageRequest, toUpstreamBody } from "./MessageSchemas.js"
import { Pacing, PacingLive } from "./Pacing.js"
import { MessagesRepo } from "./Repo.js"
import { recordAcceptance, recordFailure } from "./SendRecords.js"

export type SendOutcome =
  | { readonly _tag: "Sent"; readonly response: SendMessageResponse }
  | Extract<Claim, { readonly _tag: "Replay" }>

type SendError = Conflict | ServiceUnavailable | TooManyRequests | UpstreamFailure

interface MessageSenderShape {
  /**
   * A send, as a plain promise of its outcome (the refusal on the left), without a fiber (see the top
   * of this file). The rare effects it runs (a target to load, a failure to record, an error to log)
   * run through `inRequest`, so that their logs name the request.
   */
  readonly send: (
    instance: InstanceRef,
    request: SendMessageRequest,
    inRequest: RunInRequest,
    /** The request's span when tracing (the edge's): the send's span is its child. */
    parent?: Tracer.AnySpan
  ) => Promise<Either.Either<SendMessageResponse, SendError>>
  /**
   * A send under an Idempotency-Key: the first request with the key sends (as `send`) and keeps its
   * answer; a repeat is answered that answer again (Replay) without sending.
   */
  readonly sendOnce: (
    instance: InstanceRef,
    request: SendMessageRequest,
    idempotencyKey: string
  ) => Effect.Effect<SendOutcome, SendError>
  /** Succeeds once no send is in flight: for whoever must stop only after them (`inRequest` must work until then). */
  readonly drained: Effect.Effect<void>
}

/**
 * Answers an Idempotency-Key keeps: the success, the upstream's refusals (the same body would be
 * refused again) and sends whose outcome is unknown (a timeout or broken connection: the message may
 * have gone, so a retry must not send it twice). Throttling, upstream 5xx, and failures before the
 * upstream was called release the key instead, so the client's retry is processed afresh.
 */
const keepsAnswer = (e: SendError) =>
  e._tag === "UpstreamFailure" &&
  ((e.status < 500 && e.error === "upstream_error") || e.error === "upstream_timeout" ||
    e.error === "upstream_unreachable")

/** A send's outcome as the metrics count it (hub_sends_total's result). */
const sendResultOf = (outcome: Either.Either<SendMessageResponse, SendError>): SendResult => {
  if (Either.isRight(outcome)) return "sent"
  const e = outcome.left
  switch (e._tag) {
    case "TooManyRequests":
      return e.error === "upstream_rate_limited" ? "upstream_throttled" : "throttled"
    case "UpstreamFailure":
      return e.status < 500 && e.error === "upstream_error" ? "refused" : "failed"
    case "ServiceUnavailable":
      return e.error === "overloaded" ? "overloaded" : "not_recorded"
    case "Conflict":
      return "failed"
  }
}

const notRecorded = storageUnavailable("The message could not be recorded, so it was not sent")

/** Keeps a keyed send's final answer for its replays, or frees the key for a retry (see keepsAnswer). */
const settle = (keys: IdempotencyKeys["Type"], ref: KeyRef) => (exit: Exit.Exit<SendMessageResponse, SendError>) =>
  Exit.match(exit, {
    onSuccess: (response) => keys.complete(ref, 200, response),
    onFailure: (cause) => {
      const failure = Cause.failureOption(cause)
      return Option.isSome(failure) && keepsAnswer(failure.value)
        ? keys.complete(ref, failure.value.statusCode, errorBody(failure.value))
        : keys.release(ref)
    }
  })

/** What a send works with: the services' plain entries it calls (see the top of this file). */
interface SendContext {
  readonly repo: MessagesRepo
  readonly pacing: Pacing["Type"]
  readonly access: InstanceAccess
  readonly upstream: Upstream["Type"]
  /** Each number's live throughput level, which pacing reads (PhoneNumbers/Throughput.ts). */
  readonly throughput: Throughput
  /** The clock pacing reads: the one the layer was built with (a test's TestClock in tests). */
  readonly clock: Clock.Clock
  /** When tracing, each send is a span with its Graph call as a child (Tracing/Spans.ts). */
  readonly tracer: Tracer.Tracer | undefined
}

/** The target from the cache, or loaded (a fiber then, once a minute per instance). */
const targetOf = (
  access: InstanceAccess,
  instance: InstanceRef,
  inRequest: RunInRequest
): Either.Either<UpstreamTarget, UpstreamFailure> | Promise<Either.Either<UpstreamTarget, UpstreamFailure>> => {
  const cached = access.targetNow(instance)
  return cached === undefined ? inRequest(Effect.either(access.target(instance))) : Either.right(cached)
}

/** What a send's record is written with, queued or not: its instance, its person, its type and route. */
export const outboundRecordOf = (instance: InstanceRef, request: SendMessageRequest, endpoint: SendEndpoint) => {
  const category = request.forwarded?.category
  return {
    organizationId: instance.organizationId,
    instanceId: instance.id,
    // A send to a business-scoped user id names no number: the record shows the id.
    to: request.to ?? request.recipient ?? "",
    userId: request.recipient,
    type: request.type,
    category: typeof category === "string" ? category : undefined,
    endpoint
  }
}

/**
 * The endpoint a send goes to: `via`, else a template's (Templates/Categories.ts), else /messages; an
 * effect only when the template's category must be read. Queued sends choose theirs with it too.
 */
export const sendEndpoint = (
  repo: MessagesRepo,
  instance: InstanceRef,
  request: SendMessageRequest
): SendEndpoint | Effect.Effect<SendEndpoint> =>
  request.via === "marketing_messages"
    ? "marketing_messages"
    : request.type === "template" && request.via !== "messages"
    ? repo.templateEndpoint(
      instance.id,
      { name: request.template.name, language: request.template.language.code },
      request.via
    )
    : "messages"

/** sendEndpoint for the send core: a promise only when the category is read. */
const endpointOf = (
  repo: MessagesRepo,
  instance: InstanceRef,
  request: SendMessageRequest,
  inRequest: RunInRequest
): SendEndpoint | Promise<SendEndpoint> => {
  const chosen = sendEndpoint(repo, instance, request)
  return typeof chosen === "string" ? chosen : inRequest(chosen)
}

/** The send, as a span when tracing: its ids, the record's, the upstream's message id, the refusal's status. */
const tracedDeliver = async (
  context: SendContext,
  instance: InstanceRef,
  request: SendMessageRequest,
  body: JsonObject,
  inRequest: RunInRequest,
  parent: Tracer.AnySpan | undefined
): Promise<Either.Either<SendMessageResponse, SendError>> => {
  if (context.tracer === undefined) return deliver(context, instance, request, body, inRequest, undefined)
  const span = startSpan(context.tracer, "Messages.send", parent, "internal", {
    "hub.instance_id": instance.id,
    "hub.organization_id": instance.organizationId,
    "hub.phone_number_id": instance.phoneNumberId,
    "hub.message_type": request.type
  })
  const outcome = await deliver(context, instance, request, body, inRequest, span)
  if (Either.isRight(outcome)) annotate(span, { "hub.wamid": outcome.right.messages[0]?.id })
  else annotate(span, { "http.response.status_code": outcome.left.statusCode, "hub.error": outcome.left.error })
  endSpan(span, Either.isLeft(outcome) ? outcome.left.message : undefined)
  return outcome
}

/** The send itself: pacing, the record, the upstream call, the outcome recorded. */
const deliver = async (
  context: SendContext,
  instance: InstanceRef,
  request: SendMessageRequest,
  body: JsonObject,
  inRequest: RunInRequest,
  span: Tracer.Span | undefined
): Promise<Either.Either<SendMessageResponse, SendError>> => {
  const { repo } = context
  // The number's level, read again when this replica last looked more than a few seconds ago (a database
  // read; the Graph's, once an hour): an effect then, a map read otherwise.
  if (!context.throughput.freshNow(instance.phoneNumberId)) await inRequest(context.throughput.refresh(instance))
  // A promise only on PostgreSQL, when this replica must ask the fleet's shared budget (Pacing.ts).
  const taken = context.pacing.takeAt(instance.phoneNumberId, context.clock.unsafeCurrentTimeMillis())
  const paced = taken instanceof Promise ? await taken : taken
  if (paced !== undefined) return Either.left(paced)
  const target = await targetOf(context.access, instance, inRequest)
  if (Either.isLeft(target)) return Either.left(target.left)
  const chosen = endpointOf(repo, instance, request, inRequest)
  const endpoint = typeof chosen === "string" ? chosen : await chosen
  const record = await repo.createOutboundNow(outboundRecordOf(instance, request, endpoint))
  if (Exit.isFailure(record)) {
    await inRequest(Effect.logError("Could not record a send; nothing was sent", record.cause))
    return Either.left(notRecorded)
  }
  span?.attribute("hub.message_id", record.value.id)
  const sent = await context.upstream.sendMessage(target.right, body, endpoint, span)
  if (Either.isLeft(sent)) {
    await inRequest(recordFailure(repo, record.value.id, sent.left))
    return Either.left(toHubError(sent.left))
  }
  await recordAcceptance(repo, instance.organizationId, record.value.id, sent.right, inRequest)
  return Either.right(sent.right)
}

/** A send through the in-flight gate: refused at once when the hub or the organization is at its bound. */
const gatedSend = (
  context: SendContext,
  gate: InFlightGate<Either.Either<SendMessageResponse, SendError>>,
  metrics: Metrics["Type"],
  instance: InstanceRef,
  request: SendMessageRequest,
  body: JsonObject,
  inRequest: RunInRequest,
  parent: Tracer.AnySpan | undefined
) => {
  const refused = gate.overloaded(instance.organizationId)
  if (refused === undefined) {
    return gate.run(instance.organizationId, () => tracedDeliver(context, instance, request, body, inRequest, parent))
  }
  metrics.send("overloaded")
  return Promise.resolve(Either.left(refused))
}

/** `send` with the request's body (`send`) under an Idempotency-Key: see MessageSenderShape.sendOnce. */
const sendOnce = (
  keys: IdempotencyKeys["Type"],
  send: (
    body: JsonObject,
    inRequest: RunInRequest,
    parent: Tracer.AnySpan | undefined
  ) => Promise<Either.Either<SendMessageResponse, SendError>>,
  instance: InstanceRef,
  request: SendMessageRequest,
  idempotencyKey: string
): Effect.Effect<SendOutcome, SendError> => {
  const body = toUpstreamBody(request)
  const ref: KeyRef = { organizationId: instance.organizationId, instanceId: instance.id, key: idempotencyKey }
  // The send's own effects run in this fiber's context: its runtime carries the request's log annotations
  // (and its span, when tracing, is the send's parent).
  const sent = Effect.flatMap(
    Effect.zip(Effect.runtime<never>(), Effect.option(Effect.currentSpan)),
    ([runtime, parent]) =>
      Effect.flatMap(
        Effect.promise(() => send(body, Runtime.runPromise(runtime), Option.getOrUndefined(parent))),
        (outcome) => outcome
      )
  )
  return Effect.gen(function*() {
    const claim = yield* keys.begin({ ...ref, requestHash: requestHash(instance.id, body) })
    if (claim._tag === "Replay") return claim
    const response = yield* Effect.onExit(sent, settle(keys, ref))
    return { _tag: "Sent", response } as const
  }).pipe(
    // A client hanging up does not cut a send between its claim and its answer kept.
    Effect.uninterruptible
  )
}

export class MessageSender extends Effect.Service<MessageSender>()("MessageSender", {
  scoped: Effect.gen(function*() {
    const keys = yield* IdempotencyKeys
    const { sendMaxInFlight, sendMaxInFlightPerOrganization } = yield* HubConfig
    const metrics = yield* Metrics
    const context: SendContext = {
      repo: yield* MessagesRepo,
      pacing: yield* Pacing,
      access: yield* InstanceAccess,
      upstream: yield* Upstream,
      throughput: yield* Throughput,
      clock: yield* Effect.clock,
      tracer: yield* HubTracer
    }
    const gate = makeInFlightGate(
      { total: sendMaxInFlight, perOrganization: sendMaxInFlightPerOrganization },
      (outcome: Either.Either<SendMessageResponse, SendError>) => metrics.send(sendResultOf(outcome))
    )
    // A send runs to its end once begun, whoever waits for it: the layer's scope closes only after
    // the sends in flight have finished (each is bounded by the upstream call's deadline).
    yield* Effect.addFinalizer(() => gate.drained)

    const service: MessageSenderShape = {
      send: (instance, request, inRequest, parent) =>
        gatedSend(context, gate, metrics, instance, request, toUpstreamBody(request), inRequest, parent),
      drained: gate.drained,
      sendOnce: (instance, request, idempotencyKey) =>
        sendOnce(
          keys,
          (body, inRequest, parent) => gatedSend(context, gate, metrics, instance, request, body, inRequest, parent),
          instance,
          request,
          idempotencyKey
        )
    }
    return service
  }),
  // The Upstream, the config and the WriteBatcher are the hub's, provided beneath every service.
  dependencies: [MessagesRepo.Default, IdempotencyKeysLive, PacingLive, InstanceAccess.Default, Throughput.Default]
}) {}

/**
 * POST /api/messages, its one handler: Bun routes the request here (Edge/FastLane.ts), and HubApi's
 * declaration of the endpoint hands its requests here too (Domain/PlainRoute.ts `servedByHotRoute`).
 * Plain async code, not an effect: as an effect its fiber cost about 40 % of a send's CPU (see
 * Messages/Send.ts). Each step answers at once from what is cached (the credential, the instance) and
 * awaits an effect only where it must read the database or the upstream: a credential not cached, a
 * body of another content type than JSON, an instance looked up the first time, an Idempotency-Key.
 * The checks run in HubApi's order: the token, the body, the Idempotency-Key header, the instance.
 * A send that asks to be queued (`Prefer: respond-async`, `send_at`, `validity`, `priority`) is put on
 * the disk and answered 202 (SendQueue/QueuedSends.ts) instead of being sent now.
 */
import { HttpApiError, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Either, Schema } from "effect"
import { authenticateBearer, authenticateBearerNow } from "../ApiTokens/Middleware.js"
import { TokenResolver } from "../ApiTokens/TokenResolver.js"
import { EndpointPolicies } from "../Domain/Access.js"
import {
  declaresJson,
  jsonBodyLimit,
  malformedJson,
  type PlainResponder,
  type PlainRoute,
  requestPayload
} from "../Domain/PlainRoute.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { BodyTooLarge, readBodyAtMost } from "../Net/BodyLimit.js"
import { QueuedSends, type QueueOutcome, wantsQueue } from "../SendQueue/QueuedSends.js"
import { SendHeaders } from "./Api.js"
import { SendMessageRequest } from "./MessageSchemas.js"
import { MessageSender, type SendOutcome } from "./Send.js"

const utf8 = new TextDecoder()

const decodePayload = Schema.decodeUnknownEither(SendMessageRequest)
const decodeHeaders = Schema.decodeUnknownEither(SendHeaders)
/** Most sends carry no Idempotency-Key: nothing to decode. */
const NO_KEY = Either.right<typeof SendHeaders.Type>({})

/** The body as JSON: read within the JSON limit, or why not (413, malformed JSON), as HttpApi would answer. */
const jsonBody = async (request: Request, edge: PlainResponder): Promise<Either.Either<unknown, Response>> => {
  if (!declaresJson(request)) {
    // Form fields, text or bytes: read as HttpApi reads them (the payload schema then refuses them alike).
    const read = await edge.inRequest(Effect.either(requestPayload(request, jsonBodyLimit)))
    return Either.isRight(read) ? Either.right(read.right) : Either.left(await edge.fail(Cause.fail(read.left)))
  }
  const bytes = await readBodyAtMost(request, jsonBodyLimit.bytes)
  if (bytes instanceof BodyTooLarge) return Either.left(await edge.fail(Cause.fail(jsonBodyLimit.tooLarge)))
  try {
    return Either.right(JSON.parse(utf8.decode(bytes)))
  } catch {
    return Either.left(await edge.fail(Cause.fail(malformedJson)))
  }
}

/** A queued send's outcome as it is answered: 202 with the queued record, or the kept answer of a replay. */
const queuedResponse = (outcome: QueueOutcome) =>
  outcome._tag === "Queued"
    ? HttpServerResponse.unsafeJson(outcome.answer, { status: 202, headers: { "preference-applied": "respond-async" } })
    : replayResponse(outcome)

/** The kept answer of an Idempotency-Key's first request (a queued one's 202 says again that it was queued). */
const replayResponse = (replay: Extract<SendOutcome, { readonly _tag: "Replay" }>) =>
  HttpServerResponse.text(replay.body, {
    status: replay.statusCode,
    contentType: "application/json",
    headers: replay.statusCode === 202
      ? { "idempotent-replayed": "true", "preference-applied": "respond-async" }
      : { "idempotent-replayed": "true" }
  })

/** A keyed send's outcome as it is answered: the upstream's answer, or the kept answer of a replay. */
const outcomeResponse = (outcome: SendOutcome) =>
  outcome._tag === "Sent" ? HttpServerResponse.unsafeJson(outcome.response) : replayResponse(outcome)

export const makeSendPlainRoute = Effect.gen(function*() {
  const sender = yield* MessageSender
  const queued = yield* QueuedSends
  const access = yield* InstanceAccess
  const resolver = yield* TokenResolver
  const authenticate = authenticateBearer(resolver)
  const authenticateCached = authenticateBearerNow(resolver)
  const allowed = (yield* EndpointPolicies).acceptsOf("POST", "/api/messages")

  const handle = async (request: Request, edge: PlainResponder): Promise<Response> => {
    const authorization = request.headers.get("authorization") ?? undefined
    const principal = authenticateCached(authorization, allowed) ??
      await edge.inRequest(Effect.either(authenticate(authorization, allowed)))
    if (Either.isLeft(principal)) return edge.fail(Cause.fail(principal.left))
    const body = await jsonBody(request, edge)
    if (Either.isLeft(body)) return body.left
    const payload = decodePayload(body.right)
    if (Either.isLeft(payload)) return edge.run(HttpApiError.HttpApiDecodeError.refailParseError(payload.left))
    const key = request.headers.get("idempotency-key")
    const headers = key === null ? NO_KEY : decodeHeaders({ "idempotency-key": key })
    if (Either.isLeft(headers)) return edge.run(HttpApiError.HttpApiDecodeError.refailParseError(headers.left))
    const selector = { phoneNumberId: payload.right.phone_number_id }
    // An instance token's instance is known, and so is an organization token's once found; a first lookup is an effect.
    const instance = access.resolveNow(principal.right, selector) ??
      await edge.inRequest(Effect.either(access.resolve(principal.right, selector)))
    if (Either.isLeft(instance)) return edge.fail(Cause.fail(instance.left))
    const idempotencyKey = headers.right["idempotency-key"]
    if (wantsQueue(payload.right, request.headers.get("prefer") ?? undefined)) {
      return edge.run(Effect.map(
        idempotencyKey === undefined
          ? Effect.map(queued.enqueue(instance.right, payload.right), (answer) => ({ _tag: "Queued", answer } as const))
          : queued.enqueueOnce(instance.right, payload.right, idempotencyKey),
        queuedResponse
      ))
    }
    if (idempotencyKey !== undefined) {
      return edge.run(Effect.map(sender.sendOnce(instance.right, payload.right, idempotencyKey), outcomeResponse))
    }
    const sent = await sender.send(instance.right, payload.right, edge.inRequest, edge.span)
    return Either.isRight(sent) ? edge.json(sent.right) : edge.fail(Cause.fail(sent.left))
  }
  return { route: "POST /api/messages", drained: sender.drained, handle } satisfies PlainRoute
})

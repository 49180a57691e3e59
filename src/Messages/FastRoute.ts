/**
 * POST /api/messages on the fast lane (see Edge/FastLane.ts), as a plain handler: the HubApi endpoint's
 * checks in its order, then the send core without a fiber (MessageSender.sendNow). Requests whose
 * credential is not cached, with another content type than JSON, or with an Idempotency-Key run the
 * same checks and send as an effect instead.
 */
import { HttpApiError } from "@effect/platform"
import { Cause, Effect, Either, Schema } from "effect"
import { EndpointPolicies } from "../Domain/Access.js"
import { authenticateBearer, authenticateBearerNow } from "../Auth/Middleware.js"
import { TokenResolver } from "../Auth/TokenResolver.js"
import { declaresJson, decodeWith, jsonBodyLimit, malformedJson, type PlainResponder, type PlainRoute, requestPayload } from "../Domain/PlainRoute.js"
import { BodyTooLarge, readBodyAtMost } from "../Net/BodyLimit.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { SendHeaders } from "./Api.js"
import { makeSendMessage } from "./Http.js"
import { SendMessageRequest } from "./MessageSchemas.js"
import { MessageSender } from "./Send.js"

const utf8 = new TextDecoder()

export const makeSendPlainRoute = Effect.gen(function*() {
  const sendMessage = yield* makeSendMessage
  const sender = yield* MessageSender
  const access = yield* InstanceAccess
  const resolver = yield* TokenResolver
  const authenticate = authenticateBearer(resolver)
  const authenticateCached = authenticateBearerNow(resolver)
  const allowed = (yield* EndpointPolicies).acceptsOf("POST", "/api/messages")
  const decodeHeaders = decodeWith(SendHeaders)
  const decodePayload = decodeWith(SendMessageRequest)
  const decodePayloadNow = Schema.decodeUnknownEither(SendMessageRequest)

  /** The whole request as an effect: authentication, payload, Idempotency-Key, send. */
  const asEffect = (request: Request) =>
    Effect.gen(function*() {
      const principal = yield* authenticate(request.headers.get("authorization") ?? undefined, allowed)
      const payload = yield* Effect.flatMap(requestPayload(request, jsonBodyLimit), decodePayload)
      const key = request.headers.get("idempotency-key")
      const headers = yield* decodeHeaders(key === null ? {} : { "idempotency-key": key })
      return yield* sendMessage(principal, payload, headers["idempotency-key"])
    })

  const handle = async (request: Request, edge: PlainResponder): Promise<Response> => {
    const authenticated = authenticateCached(request.headers.get("authorization") ?? undefined, allowed)
    if (authenticated === undefined || request.headers.has("idempotency-key") || !declaresJson(request)) return edge.run(asEffect(request))
    if (Either.isLeft(authenticated)) return edge.fail(Cause.fail(authenticated.left))
    const bytes = await readBodyAtMost(request, jsonBodyLimit.bytes)
    if (bytes instanceof BodyTooLarge) return edge.fail(Cause.fail(jsonBodyLimit.tooLarge))
    let body: unknown
    try {
      body = JSON.parse(utf8.decode(bytes))
    } catch {
      return edge.fail(Cause.fail(malformedJson))
    }
    const payload = decodePayloadNow(body)
    if (Either.isLeft(payload)) return edge.run(HttpApiError.HttpApiDecodeError.refailParseError(payload.left))
    const selector = { phoneNumberId: payload.right.phone_number_id }
    // An instance token's instance is known, and so is an organization token's once found; a first lookup is an effect.
    const instance = access.resolveNow(authenticated.right, selector) ??
      await edge.inRequest(Effect.either(access.resolve(authenticated.right, selector)))
    if (Either.isLeft(instance)) return edge.fail(Cause.fail(instance.left))
    const sent = await sender.sendNow(instance.right, payload.right, edge.inRequest)
    return Either.isRight(sent) ? edge.json(sent.right) : edge.fail(Cause.fail(sent.left))
  }
  return { route: "POST /api/messages", drained: sender.drained, handle } satisfies PlainRoute
})

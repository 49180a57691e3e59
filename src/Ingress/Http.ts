import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Option, Redacted } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { BadRequest, Forbidden, PayloadTooLarge, ServiceUnavailable, Unauthorized } from "../Domain/Errors.js"
import { declaredLength } from "../Net/BodyLimit.js"
import { parseJsonObject } from "../Domain/Json.js"
import type { Envelope } from "./Envelope.js"
import { Ingress } from "./Ingress.js"
import { MAX_UPSTREAM_BODY, upstreamBodyTooLarge } from "./Api.js"
import { constantTimeEqual, verifyHubSignature } from "./HubSignature.js"


const utf8 = new TextDecoder()


const notAnObject = new BadRequest({ message: "Malformed request body: it is not a JSON object", error: "malformed_body" })

/**
 * POST /upstream/events: the signature is checked on the exact bytes before anything is parsed or
 * stored; the payload is ingested (committed) before the answer. These checks serve HubApi's
 * handler and the fast lane's route alike.
 */
export const makeUpstreamPostCheck = Effect.gen(function*() {
  const config = yield* HubConfig
  const ingress = yield* Ingress
  const appSecret = Option.map(config.appSecret, Redacted.value)
  return {
    /** Whether the declared size alone refuses the post, before its body is read. */
    declaredTooLarge: (contentLength: string | undefined) => Number(contentLength ?? 0) > MAX_UPSTREAM_BODY,
    tooLarge: upstreamBodyTooLarge,
    /** The post's envelope, or why it is refused: size, signature, JSON, then the envelope's shape. */
    check: (body: Uint8Array, signature: string | undefined): Either.Either<Envelope, PayloadTooLarge | Unauthorized | BadRequest> => {
      if (body.byteLength > MAX_UPSTREAM_BODY) return Either.left(upstreamBodyTooLarge)
      if (Option.isSome(appSecret) && !verifyHubSignature(appSecret.value, body, signature)) return Either.left(new Unauthorized())
      const payload = parseJsonObject(utf8.decode(body))
      if (payload === undefined) return Either.left(notAnObject)
      return ingress.check(payload)
    }
  }
})

export const makeReceiveUpstream = Effect.gen(function*() {
  const ingress = yield* Ingress
  const post = yield* makeUpstreamPostCheck
  return (contentLength: string | undefined, readBody: Effect.Effect<ArrayBuffer>, signature: string | undefined) =>
    Effect.gen(function*() {
      if (post.declaredTooLarge(contentLength)) return yield* upstreamBodyTooLarge
      const busy = ingress.overloaded()
      if (busy !== undefined) return yield* busy
      const release = ingress.holdUnverified(declaredLength(contentLength))
      if (release instanceof ServiceUnavailable) return yield* release
      const envelope = yield* Effect.flatMap(readBody, (body) => post.check(new Uint8Array(body), signature)).pipe(Effect.ensuring(Effect.sync(release)))
      const stillBusy = ingress.overloaded()
      if (stillBusy !== undefined) return yield* stillBusy
      return HttpServerResponse.unsafeJson(yield* ingress.ingestEnvelope(envelope))
    })
})

export const UpstreamEventsHttpLive = HttpApiBuilder.group(HubApi, "upstreamEvents", (handlers) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const receive = yield* makeReceiveUpstream
    return handlers
      .handle("verify", ({ urlParams }) =>
        Effect.gen(function*() {
          const offered = urlParams["hub.verify_token"]
          const verified = Option.isSome(config.verifyToken) && urlParams["hub.mode"] === "subscribe" && offered !== undefined &&
            urlParams["hub.challenge"] !== undefined && constantTimeEqual(offered, Redacted.value(config.verifyToken.value))
          if (!verified) {
            return yield* new Forbidden({
              message: Option.isNone(config.verifyToken)
                ? "Webhook verification is not configured (HUB_VERIFY_TOKEN is not set)"
                : "Webhook verification failed: hub.mode must be subscribe and hub.verify_token must match",
              error: "verification_failed"
            })
          }
          return urlParams["hub.challenge"] ?? ""
        }))
      .handleRaw("receive", ({ request }) =>
        receive(request.headers["content-length"], Effect.orDie(request.arrayBuffer), request.headers["x-hub-signature-256"]))
  }))

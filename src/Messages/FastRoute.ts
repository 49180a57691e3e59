/** POST /api/messages on the fast lane (see FastLane.ts): the HubApi endpoint's checks, in its order. */
import { Effect, Layer } from "effect"
import { AccessPolicy } from "../Auth/Access.js"
import { authenticateBearer } from "../Auth/Middleware.js"
import { TokenResolver } from "../Auth/TokenResolver.js"
import { decodeWith, installHotRoute, requestPayload } from "../FastLane.js"
import { SendHeaders } from "./Api.js"
import { makeSendMessage } from "./Http.js"
import { SendMessageRequest } from "./MessageSchemas.js"

export const SendFastRouteLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const sendMessage = yield* makeSendMessage
    const authenticate = authenticateBearer(yield* TokenResolver)
    const allowed = AccessPolicy["POST /api/messages"] ?? []
    const decodeHeaders = decodeWith(SendHeaders)
    const decodePayload = decodeWith(SendMessageRequest)
    yield* installHotRoute("POST /api/messages", (request) =>
      Effect.gen(function*() {
        const principal = yield* authenticate(request.headers.get("authorization") ?? undefined, allowed)
        const payload = yield* Effect.flatMap(requestPayload(request), decodePayload)
        const key = request.headers.get("idempotency-key")
        const headers = yield* decodeHeaders(key === null ? {} : { "idempotency-key": key })
        return yield* sendMessage(principal, payload, headers["idempotency-key"])
      }))
  })
)

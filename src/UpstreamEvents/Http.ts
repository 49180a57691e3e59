/** The upstream's callback: the GET handshake, and the posts (served by their fast route). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option, Redacted } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { Forbidden } from "../Domain/Errors.js"
import { servedByHotRoute } from "../Domain/PlainRoute.js"
import { constantTimeEqual } from "./HubSignature.js"

export const UpstreamEventsHttpLive = HttpApiBuilder.group(
  HubApi,
  "upstreamEvents",
  (handlers) =>
    Effect.gen(function*() {
      const config = yield* HubConfig
      return handlers
        .handle("verify", ({ urlParams }) =>
          Effect.gen(function*() {
            const offered = urlParams["hub.verify_token"]
            const verified = Option.isSome(config.verifyToken) && urlParams["hub.mode"] === "subscribe" &&
              offered !== undefined &&
              urlParams["hub.challenge"] !== undefined &&
              constantTimeEqual(offered, Redacted.value(config.verifyToken.value))
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
        // Served by its one handler, Bun's fast route (UpstreamEvents/FastRoute.ts).
        .handleRaw("receive", servedByHotRoute("POST /upstream/events"))
    })
)

/**
 * Where the upstream posts its events: no Bearer token, the upstream signs with the app secret and
 * verifies the callback with the verify token.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Forbidden, PayloadTooLarge, ServiceUnavailable, Unauthorized } from "../Domain/Errors.js"
import { JsonObjectSchema } from "../Domain/Json.js"

export const IngestSummary = Schema.Struct({
  changes: Schema.Number,
  accepted: Schema.Number,
  duplicates: Schema.Number,
  unrouted: Schema.Number,
  deliveries: Schema.Number
})

export class UpstreamEventsApi extends HttpApiGroup.make("upstreamEvents")
  .add(
    HttpApiEndpoint.get("verify", "/upstream/events")
      .setUrlParams(Schema.Struct({
        "hub.mode": Schema.optional(Schema.String),
        "hub.verify_token": Schema.optional(Schema.String),
        "hub.challenge": Schema.optional(Schema.String)
      }))
      .addSuccess(HttpApiSchema.Text().annotations({ description: "The hub.challenge, as sent" }))
      .addError(Forbidden)
  )
  .add(
    HttpApiEndpoint.post("receive", "/upstream/events")
      // Documented only: the handler reads the raw bytes, which the signature covers.
      .setPayload(JsonObjectSchema.annotations({ description: "Upstream webhook envelope {object, entry[]}" }))
      .addSuccess(IngestSummary)
      .addError(Unauthorized)
      .addError(PayloadTooLarge)
      .addError(ServiceUnavailable)
  )
{}

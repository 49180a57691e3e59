/**
 * Where the upstream posts its events: no Bearer token, the upstream signs with the app secret and
 * verifies the callback with the verify token.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { bodyLimit, type RouteBodyLimit } from "../Domain/Access.js"
import { documented } from "../Domain/Documented.js"
import { PayloadTooLarge, Wire } from "../Domain/Errors.js"
import { JsonObjectSchema } from "../Domain/Json.js"

const IngestSummary = Schema.Struct({
  changes: Schema.Number,
  accepted: Schema.Number,
  duplicates: Schema.Number,
  unrouted: Schema.Number,
  deliveries: Schema.Number,
  stale: Schema.Number.annotations({
    description: "Changes of a replay kept aside, not delivered: a post whose changes are all older than HUB_RETENTION"
  })
})

/** A status event for the sandbox's demo number, as the upstream posts it. */
const STATUS_EVENT_EXAMPLE = {
  object: "whatsapp_business_account",
  entry: [{
    id: "200000000000001",
    changes: [{
      field: "messages",
      value: {
        messaging_product: "whatsapp",
        metadata: { display_phone_number: "15550000001", phone_number_id: "100000000000001" },
        statuses: [{
          id: "wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI",
          status: "delivered",
          timestamp: "1760000000",
          recipient_id: "16505551234"
        }]
      }
    }]
  }]
}

/** The largest upstream post: Meta's are a few KB, batches well under 1 MB; anything far larger is refused. */
export const MAX_UPSTREAM_BODY = 8 * 1024 * 1024

export const upstreamBodyTooLarge = new PayloadTooLarge({
  message: "The event payload is larger than 8 MB",
  error: "payload_too_large"
})

const UPSTREAM_POST_LIMIT: RouteBodyLimit = { bytes: MAX_UPSTREAM_BODY, tooLarge: () => upstreamBodyTooLarge }

export class UpstreamEventsApi extends HttpApiGroup.make("upstreamEvents")
  .annotate(
    OpenApi.Description,
    "Where the upstream posts its events (signed with the app secret) and verifies the callback; no Bearer token."
  )
  .add(
    HttpApiEndpoint.get("verify", "/upstream/events")
      .setUrlParams(Schema.Struct({
        "hub.mode": Schema.optional(Schema.String),
        "hub.verify_token": Schema.optional(Schema.String),
        "hub.challenge": Schema.optional(Schema.String)
      }))
      .addSuccess(HttpApiSchema.Text().annotations({ description: "The hub.challenge, as sent" }))
      .addError(Wire.Forbidden)
      .pipe(documented(
        "Verify the callback (the upstream calls this)",
        "The upstream's subscription handshake: with `hub.mode=subscribe` and the hub's verify token, answers `hub.challenge`; 403 otherwise."
      ))
  )
  .add(
    HttpApiEndpoint.post("receive", "/upstream/events")
      // Documented only: the handler reads the raw bytes, which the signature covers.
      .setPayload(JsonObjectSchema.annotations({ description: "Upstream webhook envelope {object, entry[]}" }))
      .addSuccess(IngestSummary)
      .addError(Wire.Unauthorized)
      .addError(Wire.PayloadTooLarge)
      .addError(Wire.ServiceUnavailable)
      .pipe(
        bodyLimit(UPSTREAM_POST_LIMIT),
        documented(
          "Receive upstream events (the upstream calls this)",
          "The upstream posts its webhook envelopes here, signed with `X-Hub-Signature-256` when the hub has an app secret " +
            "(401 if the signature does not match). Answered 200 once the events and their deliveries are committed; each change " +
            "is routed by its phone number id to the instance's webhooks. At most 8 MB.",
          { example: STATUS_EVENT_EXAMPLE }
        )
      )
  )
{}

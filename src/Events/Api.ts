/**
 * Where the upstream posts its events (no Bearer token: the upstream signs with the app secret and
 * verifies the callback with the verify token), and the sandbox's inbound-message simulator.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { documented } from "../Auth/Documented.js"
import { Authentication } from "../Auth/Middleware.js"
import { Wire } from "../Domain/Errors.js"
import { GraphId } from "../Domain/Ids.js"
import { JsonObjectSchema, OtherKeys } from "../Domain/Json.js"
import { IdString, Label, RequestStruct } from "../Domain/Schemas.js"
import { INBOUND_MESSAGE_TYPES, type InboundMessageType } from "../Upstream/Sandbox.js"

export const IngestSummary = Schema.Struct({
  changes: Schema.Number,
  accepted: Schema.Number,
  duplicates: Schema.Number,
  unrouted: Schema.Number,
  deliveries: Schema.Number
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
        statuses: [{ id: "wamid.HBgLMTY1MDU1NTEyMzQVAgARGBI", status: "delivered", timestamp: "1760000000", recipient_id: "16505551234" }]
      }
    }]
  }]
}

export class UpstreamEventsApi extends HttpApiGroup.make("upstreamEvents")
  .annotate(OpenApi.Description, "Where the upstream posts its events (signed with the app secret) and verifies the callback; no Bearer token.")
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
      .pipe(documented(
        "Receive upstream events (the upstream calls this)",
        "The upstream posts its webhook envelopes here, signed with `X-Hub-Signature-256` when the hub has an app secret " +
          "(401 if the signature does not match). Answered 200 once the events and their deliveries are committed; each change " +
          "is routed by its phone number id to the instance's webhooks. At most 8 MB.",
        { example: STATUS_EVENT_EXAMPLE }
      ))
  )
{}

const Text = (max: number) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` })
  )

/** Present with its type, or absent (never `undefined`), so a bad value is reported once. */
const optionalField = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

const inboundTypes: ReadonlySet<string> = new Set(INBOUND_MESSAGE_TYPES)

// A refinement rather than a Literal union, so a wrong value is one issue instead of one per member.
const InboundType = Schema.String.pipe(
  Schema.filter((s): s is InboundMessageType => inboundTypes.has(s), {
    message: () => `must be one of ${INBOUND_MESSAGE_TYPES.join(", ")}`
  })
)

/** Media the customer "sent": the sandbox mints an id its GET /media answers for, unless one is given. */
const Media = Schema.Struct({ id: Schema.optional(Text(128)) }, OtherKeys)

/**
 * One simulated inbound message: `type` and, optionally, its content object named like the type
 * (fields left out get plausible values). Organization tokens name the instance.
 */
export const SandboxInbound = RequestStruct({
  from: Schema.String.pipe(Schema.pattern(/^\+?\d{6,20}$/, { message: () => "must be a phone number: digits, E.164 without +" })),
  type: InboundType,
  name: Schema.optional(Label(100)).annotations({ description: "The sender's profile name" }),
  context: optionalField(Schema.Struct({ id: Text(256) }).annotations({ description: "The business message this one replies to" })),
  instance_id: Schema.optional(IdString),
  phone_number_id: Schema.optional(GraphId),
  text: optionalField(Schema.Struct({ body: Text(4096) }, OtherKeys)),
  image: optionalField(Media),
  document: optionalField(Media),
  audio: optionalField(Media),
  video: optionalField(Media),
  sticker: optionalField(Media),
  location: optionalField(Schema.Struct({ latitude: Schema.Number, longitude: Schema.Number }, OtherKeys)),
  contacts: optionalField(Schema.Array(JsonObjectSchema).pipe(Schema.minItems(1, { message: () => "must hold at least one contact" }))),
  interactive: optionalField(
    Schema.Struct({ type: Schema.Literal("button_reply", "list_reply") }, OtherKeys).pipe(
      Schema.filter((i) => i[i.type] !== undefined || { path: [i.type], message: `is required when interactive.type is ${i.type}` })
    )
  ),
  reaction: optionalField(Schema.Struct({ message_id: Text(256), emoji: Schema.optional(Schema.String) }, OtherKeys)),
  order: optionalField(Schema.Struct({ catalog_id: Text(64), product_items: Schema.Array(JsonObjectSchema) }, OtherKeys))
})

export const InboundAccepted = Schema.Struct({
  id: Schema.String.annotations({ description: "The upstream message id (wamid) of the simulated message" }),
  deliveries: Schema.Number.annotations({ description: "Webhook deliveries queued for it" })
})

export class SandboxApi extends HttpApiGroup.make("sandbox")
  .annotate(OpenApi.Description, "The sandbox upstream's simulator (sandbox mode only).")
  .add(
    HttpApiEndpoint.post("inbound", "/sandbox/inbound")
      .setPayload(SandboxInbound)
      .addSuccess(InboundAccepted)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(documented(
        "Simulate an inbound message (sandbox)",
        "The sandbox upstream posts a message from `from` to the instance's number, as a customer would send it; the " +
          "instance's webhooks receive it. An organization token names the instance with `instance_id` or `phone_number_id`.",
      { example: { from: "16505551234", type: "text", text: { body: "Hi, is my order on its way?" } } }
    ))
  )
  .middleware(Authentication)
{}

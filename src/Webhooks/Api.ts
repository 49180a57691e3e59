/**
 * Webhooks of an instance (organization tokens for their instances, instance tokens for their own):
 * the spec's create / update / delete, plus list, read, the delivery log, replay and secret rotation.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../Domain/Authentication.js"
import { Conflict, Forbidden, NotFound } from "../Domain/Errors.js"
import { IdString, IsoTimestamp, Label, RequestStruct } from "../Domain/Schemas.js"

export const WebhookUrl = Schema.Trim.pipe(
  Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
  Schema.filter((s) => {
    const url = URL.parse(s)
    return (url !== null && (url.protocol === "http:" || url.protocol === "https:") && url.hostname !== "") ||
      "must be an http or https URL"
  })
).annotations({ description: "http(s) URL that receives the events", examples: ["https://example.com/hooks/whatsapp"] })

export const CreateWebhook = RequestStruct({
  instance_id: Schema.optional(IdString).annotations({ description: "Required with an organization token" }),
  url: WebhookUrl,
  name: Label(100)
})

export const UpdateWebhook = RequestStruct({
  url: Schema.optional(WebhookUrl),
  name: Schema.optional(Label(100)),
  active: Schema.optional(Schema.Boolean)
}).pipe(
  Schema.filter((patch) =>
    patch.url !== undefined || patch.name !== undefined || patch.active !== undefined || "give at least one of url, name, active"
  )
)

export const WebhookRecord = Schema.Struct({
  id: Schema.String,
  instance_id: Schema.String,
  url: Schema.String,
  name: Schema.String,
  active: Schema.Boolean,
  disabled_reason: Schema.optional(Schema.String).annotations({ description: "Why the hub turned the webhook off" }),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp
})

export const WebhookCreated = Schema.Struct({
  ...WebhookRecord.fields,
  secret: Schema.String.annotations({ description: "Signing secret (whsec_…); shown only in this response" })
})

export const SecretRotated = Schema.Struct({
  secret: Schema.String.annotations({ description: "The new signing secret; shown only in this response" }),
  previous_secret_expires_at: IsoTimestamp.annotations({ description: "Until then deliveries carry both signatures" })
})

const deliveryStatuses = ["pending", "failed", "succeeded", "dead", "cancelled"] as const
const deliveryStatusSet: ReadonlySet<string> = new Set(deliveryStatuses)

/** A refinement rather than a Literal union, so a wrong value is reported once, not once per member. */
export const DeliveryStatus = Schema.String.pipe(
  Schema.filter((s): s is typeof deliveryStatuses[number] => deliveryStatusSet.has(s), {
    message: () => `must be one of ${deliveryStatuses.join(", ")}`
  })
)

const PositiveInt = (max: number, fallback: number) =>
  Schema.optionalWith(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "must be a whole number" }),
      Schema.between(1, max, { message: () => `must be from 1 to ${max}` })
    ),
    { default: () => fallback }
  )

export const DeliveriesQuery = RequestStruct({
  page: PositiveInt(1_000_000, 1),
  limit: PositiveInt(100, 50),
  status: Schema.optional(DeliveryStatus)
})

export const Attempt = Schema.Struct({
  attempt: Schema.Number,
  started_at: IsoTimestamp,
  status_code: Schema.NullOr(Schema.Number),
  latency_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response_snippet: Schema.NullOr(Schema.String).annotations({ description: "First KB of the receiver's answer" })
})

export const Delivery = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  event_id: Schema.String,
  message_id: Schema.String.annotations({ description: "The webhook-id header: the same on every attempt" }),
  status: DeliveryStatus,
  attempts: Schema.Number,
  next_attempt_at: Schema.NullOr(IsoTimestamp),
  last_status_code: Schema.NullOr(Schema.Number),
  last_error: Schema.NullOr(Schema.String),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
  attempt_log: Schema.Array(Attempt)
})

const WebhookPath = Schema.Struct({ id: IdString })

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .add(
    HttpApiEndpoint.post("create", "/api/webhooks")
      .setPayload(CreateWebhook)
      .addSuccess(WebhookCreated, { status: 201 })
      .addError(Forbidden)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("list", "/api/webhooks")
      .setUrlParams(RequestStruct({ instance_id: Schema.optional(IdString) }))
      .addSuccess(Schema.Struct({ data: Schema.Array(WebhookRecord) }))
      .addError(Forbidden)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("get", "/api/webhooks/:id").setPath(WebhookPath).addSuccess(WebhookRecord).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookRecord)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/webhooks/:id").setPath(WebhookPath).addSuccess(HttpApiSchema.NoContent).addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/api/webhooks/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(DeliveriesQuery)
      .addSuccess(Schema.Struct({ data: Schema.Array(Delivery), total: Schema.Number, page: Schema.Number, limit: Schema.Number }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("retry", "/api/webhooks/:id/deliveries/:deliveryId/retry")
      .setPath(Schema.Struct({ id: IdString, deliveryId: IdString }))
      .addSuccess(Delivery)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/api/webhooks/:id/rotate-secret")
      .setPath(WebhookPath)
      .addSuccess(SecretRotated)
      .addError(NotFound)
  )
  .middleware(Authentication)
{}

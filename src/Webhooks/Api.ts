/**
 * Webhooks of an instance (organization tokens for their instances, instance tokens for their own):
 * the spec's create / update / delete, plus list, read, the delivery log, replay and secret rotation.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { documented } from "../Auth/Documented.js"
import { Authentication } from "../Auth/Middleware.js"
import { Wire } from "../Domain/Errors.js"
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
  .annotate(OpenApi.Description, "Webhooks that receive the upstream's events for an instance, signed (Standard Webhooks), with their delivery log.")
  .add(
    HttpApiEndpoint.post("create", "/api/webhooks")
      .setPayload(CreateWebhook)
      .addSuccess(WebhookCreated, { status: 201 })
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(documented(
        "Register a webhook",
        "The URL receives every upstream event of the instance as a signed POST (Standard Webhooks headers, signed with the " +
          "`secret` in this answer, shown only now). An organization token names the instance with `instance_id`.",
      { example: { url: "https://example.com/hooks/whatsapp", name: "My receiver" } }
    ))
  )
  .add(
    HttpApiEndpoint.get("list", "/api/webhooks")
      .setUrlParams(RequestStruct({ instance_id: Schema.optional(IdString) }))
      .addSuccess(Schema.Struct({ data: Schema.Array(WebhookRecord) }))
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .pipe(documented("List webhooks", "The webhooks of the token's instance, or of the organization's instances (one with `instance_id`)."))
  )
  .add(
    HttpApiEndpoint.get("get", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(WebhookRecord)
      .addError(Wire.NotFound)
      .pipe(documented("Read a webhook"))
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookRecord)
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(documented("Update a webhook", "Changes its `url` or `name`, or turns it off and on with `active`.", { example: { active: false } }))
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Wire.NotFound)
      .pipe(documented("Delete a webhook", "Its pending deliveries are cancelled."))
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/api/webhooks/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(DeliveriesQuery)
      .addSuccess(Schema.Struct({ data: Schema.Array(Delivery), total: Schema.Number, page: Schema.Number, limit: Schema.Number }))
      .addError(Wire.NotFound)
      .pipe(documented("List a webhook's deliveries", "Newest first, each with its attempts (status code, latency, error); filter by `status`."))
  )
  .add(
    HttpApiEndpoint.post("retry", "/api/webhooks/:id/deliveries/:deliveryId/retry")
      .setPath(Schema.Struct({ id: IdString, deliveryId: IdString }))
      .addSuccess(Delivery)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .pipe(documented("Retry a delivery", "Queues a finished (dead, failed or succeeded) delivery again, at once."))
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/api/webhooks/:id/rotate-secret")
      .setPath(WebhookPath)
      .addSuccess(SecretRotated)
      .addError(Wire.NotFound)
      .pipe(documented(
        "Rotate a webhook's signing secret",
        "Returns the new secret (shown only now); deliveries carry signatures of both secrets until the old one expires."
      ))
  )
  .middleware(Authentication)
{}

/**
 * The sandbox's simulators (sandbox mode only): a customer "sends" the business a message, or the
 * upstream posts changes of any kind (to try webhooks' event filters without a Meta account).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { CHANGE_FIELDS } from "../Domain/EventKinds.js"
import { GraphId } from "../Domain/Ids.js"
import { JsonObjectSchema, OtherKeys } from "../Domain/Json.js"
import { IdString, Label, RequestStruct } from "../Domain/Schemas.js"
import { BusinessScopedUserId } from "../Domain/UserIds.js"
import { type InboundMessageType, inboundMessageTypes } from "../Domain/Vocabulary.js"

const Text = (max: number) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` })
  )

/** Present with its type, or absent (never `undefined`), so a bad value is reported once. */
const optionalField = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

const inboundTypes: ReadonlySet<string> = new Set(inboundMessageTypes)

// A refinement rather than a Literal union, so a wrong value is one issue instead of one per member.
const InboundType = Schema.String.pipe(
  Schema.filter((s): s is InboundMessageType => inboundTypes.has(s), {
    message: () => `must be one of ${inboundMessageTypes.join(", ")}`
  })
)

/** Media the customer "sent": the sandbox mints an id its GET /media answers for, unless one is given. */
const Media = Schema.Struct({ id: Schema.optional(Text(128)) }, OtherKeys)

/**
 * One simulated inbound message: `type` and, optionally, its content object named like the type
 * (fields left out get plausible values). Organization tokens name the instance.
 */
export const SandboxInbound = RequestStruct({
  from: Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^\+?\d{6,20}$/, { message: () => "must be a phone number: digits, E.164 without +" })
    )
  ).annotations({ description: "The sender's number; leave it out for a username user who hides it (give user_id)" }),
  user_id: Schema.optional(BusinessScopedUserId).annotations({
    description: "The sender's business-scoped user id (from_user_id), as Meta gives it since 2026"
  }),
  username: Schema.optional(Label(64)).annotations({
    description: "The sender's WhatsApp username (contacts[].profile.username)"
  }),
  type: InboundType,
  name: Schema.optional(Label(100)).annotations({ description: "The sender's profile name" }),
  context: optionalField(
    Schema.Struct({ id: Text(256) }).annotations({ description: "The business message this one replies to" })
  ),
  instance_id: Schema.optional(IdString),
  phone_number_id: Schema.optional(GraphId),
  text: optionalField(Schema.Struct({ body: Text(4096) }, OtherKeys)),
  image: optionalField(Media),
  document: optionalField(Media),
  audio: optionalField(Media),
  video: optionalField(Media),
  sticker: optionalField(Media),
  location: optionalField(Schema.Struct({ latitude: Schema.Number, longitude: Schema.Number }, OtherKeys)),
  contacts: optionalField(
    Schema.Array(JsonObjectSchema).pipe(Schema.minItems(1, { message: () => "must hold at least one contact" }))
  ),
  interactive: optionalField(
    Schema.Struct({ type: Schema.Literal("button_reply", "list_reply") }, OtherKeys).pipe(
      Schema.filter((i) =>
        i[i.type] !== undefined || { path: [i.type], message: `is required when interactive.type is ${i.type}` }
      )
    )
  ),
  reaction: optionalField(Schema.Struct({ message_id: Text(256), emoji: Schema.optional(Schema.String) }, OtherKeys)),
  order: optionalField(
    Schema.Struct({ catalog_id: Text(64), product_items: Schema.Array(JsonObjectSchema) }, OtherKeys)
  )
}).pipe(
  Schema.filter((inbound) =>
    inbound.from !== undefined || inbound.user_id !== undefined ||
    { path: ["from"], message: "give from (the sender's number), user_id (their business-scoped user id), or both" }
  )
)

export const InboundAccepted = Schema.Struct({
  id: Schema.String.annotations({ description: "The upstream message id (wamid) of the simulated message" }),
  deliveries: Schema.Number.annotations({ description: "Webhook deliveries queued for it" })
})

const changeFields: ReadonlyArray<string> = ["messages", ...CHANGE_FIELDS]
const changeFieldSet: ReadonlySet<string> = new Set(changeFields)

/** One upstream change to simulate: its field and value (its `metadata` is set to the instance's number). */
const SimulatedChange = Schema.Struct({
  field: Schema.String.pipe(
    Schema.filter((f) => changeFieldSet.has(f), { message: () => `must be one of ${changeFields.join(", ")}` })
  ),
  value: Schema.optionalWith(JsonObjectSchema, { default: () => ({}) })
})

/**
 * Upstream changes to simulate, posted as one upstream envelope for the instance (organization
 * tokens name it). Each value gets `messaging_product` unless it has one, and `metadata` naming the
 * instance's number, so every change routes to this instance and no other.
 */
const SandboxChanges = RequestStruct({
  instance_id: Schema.optional(IdString),
  phone_number_id: Schema.optional(GraphId),
  changes: Schema.Array(SimulatedChange).pipe(
    Schema.minItems(1, { message: () => "must hold at least one change" }),
    Schema.maxItems(20, { message: () => "must hold at most 20 changes" })
  )
})

export const ChangesAccepted = Schema.Struct({
  accepted: Schema.Number.annotations({ description: "Changes stored (a change posted before is a duplicate)" }),
  deliveries: Schema.Number.annotations({ description: "Webhook deliveries queued for them" })
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
      .pipe(
        accepts(apiTokens),
        documented(
          "Simulate an inbound message (sandbox)",
          "The sandbox upstream posts a message from `from` (or, for a username user, `user_id` alone) to the instance's number, as a customer would send it; the " +
            "instance's webhooks receive it. An organization token names the instance with `instance_id` or `phone_number_id`.",
          { example: { from: "16505551234", type: "text", text: { body: "Hi, is my order on its way?" } } }
        )
      )
  )
  .add(
    HttpApiEndpoint.post("changes", "/sandbox/changes")
      .setPayload(SandboxChanges)
      .addSuccess(ChangesAccepted)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Simulate upstream changes (sandbox)",
          "The sandbox upstream posts changes of any kind (`field` and `value`) for the instance's number, as Meta would: to try " +
            "webhooks' event filters without a Meta account. The hub sets each change's metadata to the instance's number.",
          { example: { changes: [{ field: "account_update", value: { event: "VERIFIED_ACCOUNT" } }] } }
        )
      )
  )
  .middleware(Authentication)
{}

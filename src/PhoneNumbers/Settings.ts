/**
 * The settings update: exactly one feature section per request, each checked lightly on the values
 * the spec shows and otherwise passed through untouched (the upstream's spellings differ between
 * sources, so enums are accepted in any case and unknown fields are kept).
 */
import { Schema } from "effect"
import { JsonObjectSchema, PassThrough } from "../Domain/Json.js"
import type { Json, JsonObject } from "../Domain/Json.js"
import { forwardedBody, ForwardedRequest } from "../Domain/Schemas.js"

const SETTINGS_SECTIONS = ["calling", "payload_encryption", "storage_configuration", "user_identity_change"] as const

const anyCase = (values: ReadonlyArray<string>) =>
  Schema.String.pipe(Schema.filter((s) => values.includes(s.toLowerCase()), {
    message: () => `must be one of ${values.join(", ")} (any case)`
  }))

/** Absent or an object, never undefined: a nested failure is then reported once, at its own field. */
const exactOptional = <A, I>(schema: Schema.Schema<A, I>) => Schema.optionalWith(schema, { exact: true })

const EnabledOrDisabled = anyCase(["enabled", "disabled"])

const Calling = PassThrough({
  status: Schema.optional(EnabledOrDisabled),
  call_icon_visibility: Schema.optional(anyCase(["default", "disable_all", "visible", "hidden"])),
  callback_permission_status: Schema.optional(EnabledOrDisabled),
  srtp_key_exchange_protocol: Schema.optional(anyCase(["dtls", "sdes", "dtls-srtp"])),
  sip: exactOptional(
    PassThrough({
      status: Schema.optional(EnabledOrDisabled),
      servers: Schema.optional(Schema.Array(JsonObjectSchema))
    })
  )
})

const PayloadEncryption = PassThrough({
  status: EnabledOrDisabled,
  client_encryption_key: Schema.optional(
    Schema.String.pipe(Schema.nonEmptyString({ message: () => "must be the base64 public key" }))
  )
}).pipe(
  Schema.filter((section) =>
    section.status.toLowerCase() === "enabled" && section.client_encryption_key === undefined
      ? { path: ["client_encryption_key"], message: "is required when status is enabled" }
      : undefined
  )
)

const StorageConfiguration = PassThrough({
  status: Schema.optional(anyCase(["default", "in_country_storage_enabled", "no_storage_enabled"])),
  data_localization_region: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^[A-Z]{2}$/, { message: () => "must be a two-letter country code such as DE" }))
  )
})

const UserIdentityChange = PassThrough({
  enable_identity_key_check: Schema.optional(Schema.Boolean),
  enabled: Schema.optional(Schema.Boolean)
})

/** The hub's own keys of a settings update (which instance): never sent upstream. */
const HUB_KEYS = ["instance_id", "phone_number_id"]

/** The feature sections an update gives: the modeled ones, and any other (a section Meta adds, forwarded as given). */
const sectionsOf = (update: { readonly [key: string]: Json | undefined }) =>
  Object.keys(forwardedBody(update, HUB_KEYS))

export const SettingsUpdate = ForwardedRequest({
  calling: exactOptional(Calling),
  payload_encryption: exactOptional(PayloadEncryption),
  storage_configuration: exactOptional(StorageConfiguration),
  user_identity_change: exactOptional(UserIdentityChange)
}).pipe(
  Schema.filter((update) => {
    const found = sectionsOf(update)
    if (found.length === 1) return undefined
    const which = found.length === 0 ? "none" : found.join(", ")
    return {
      path: [],
      message: `exactly one feature section per request: give one of ${SETTINGS_SECTIONS.join(", ")} (found ${which})`
    }
  }),
  Schema.annotations({ parseOptions: { errors: "all" }, identifier: "SettingsUpdate" })
)

/** The one section of a valid update, as the upstream body. */
export const upstreamBody = (update: typeof SettingsUpdate.Type): JsonObject => forwardedBody(update, HUB_KEYS)

const SECRET_KEY = /password/i

const isJsonArray = (v: Json): v is ReadonlyArray<Json> => Array.isArray(v)

const strip = (v: Json): Json => {
  if (isJsonArray(v)) return v.map(strip)
  if (typeof v === "object" && v !== null) return withoutPasswords(v)
  return v
}

/** The settings without SIP passwords (or any other password field), at any depth. */
export const withoutPasswords = (value: JsonObject): JsonObject => {
  const out: Record<string, Json> = {}
  for (const [key, v] of Object.entries(value)) if (!SECRET_KEY.test(key)) out[key] = strip(v)
  return out
}

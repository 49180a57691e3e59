/**
 * Settings of the instance's business phone number (instance tokens; the read may carry SIP
 * passwords) and the business account's phone number list (business account data: organization
 * tokens too, naming the instance).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphList, GraphPagingFields, JsonObjectSchema, PassThrough } from "../Domain/Json.js"
import { RequestStruct } from "../Domain/Schemas.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"
import { SettingsUpdate } from "./Settings.js"

const SettingsQuery = RequestStruct({
  include_sip_credentials: Schema.optional(
    Schema.Literal("true", "false").annotations({
      message: () => ({ message: "must be true or false", override: true })
    })
  )
})

const SettingsUpdated = Schema.Struct({ success: Schema.Boolean })

const PhoneNumberListQuery = RequestStruct({
  ...instanceSelectorFields,
  ...GraphPagingFields
})

export const PhoneNumber = PassThrough({
  id: Schema.String,
  display_phone_number: Schema.optional(Schema.String),
  verified_name: Schema.optional(Schema.String),
  quality_rating: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String)
})

const updateSettings = <const Name extends string, const Path extends `/${string}`>(name: Name, path: Path) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(SettingsUpdate)
    .addSuccess(SettingsUpdated)
    .addError(Wire.PayloadTooLarge)
    .pipe(
      accepts(instanceOnly),
      documented(
        "Update phone number settings",
        "Exactly one section per request: `calling`, `payload_encryption`, `storage_configuration` or `user_identity_change`, " +
          "or a section Meta adds. Fields the hub does not model, and sections it does not know, are forwarded to the Graph unchanged.",
        { example: { calling: { status: "enabled", call_icon_visibility: "DEFAULT" } } }
      )
    )

export class PhoneNumbersApi extends HttpApiGroup.make("phoneNumbers")
  .annotate(OpenApi.Description, "Settings of the instance's phone number and the business account's phone numbers.")
  .add(
    HttpApiEndpoint.get("settings", "/api/phone-numbers/settings")
      .setUrlParams(SettingsQuery)
      .addSuccess(
        JsonObjectSchema.annotations({
          description: "The upstream settings object; SIP passwords only with include_sip_credentials=true"
        })
      )
      .pipe(
        accepts(instanceOnly),
        documented(
          "Read phone number settings",
          "Calling, payload encryption and storage settings of the instance's number; SIP passwords only with `include_sip_credentials=true`."
        )
      )
  )
  .add(updateSettings("updateSettings", "/phone-numbers/settings"))
  .add(updateSettings("updateSettingsApi", "/api/phone-numbers/settings"))
  .add(
    HttpApiEndpoint.get("list", "/phone-numbers/list")
      .setUrlParams(PhoneNumberListQuery)
      .addSuccess(GraphList(PhoneNumber))
      .pipe(
        accepts(apiTokens),
        documented(
          "List business phone numbers",
          "The phone numbers of the instance's business account, from the upstream, with its paging cursors. An organization " +
            "token names the instance with `instance_id` or `phone_number_id`."
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

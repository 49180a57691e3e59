/** The WhatsApp business profile of the instance's phone number (instance tokens only). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { PassThrough } from "../Domain/Json.js"
import { RequestStruct } from "../Domain/Schemas.js"

export const BusinessProfile = PassThrough({
  about: Schema.optional(Schema.String),
  address: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  email: Schema.optional(Schema.String),
  profile_picture_url: Schema.optional(Schema.String),
  websites: Schema.optional(Schema.Array(Schema.String)),
  vertical: Schema.optional(Schema.String)
})

export class BusinessProfileApi extends HttpApiGroup.make("businessProfile")
  .annotate(OpenApi.Description, "The WhatsApp business profile of the instance's phone number.")
  .add(
    HttpApiEndpoint.get("get", "/api/business-profile")
      .setUrlParams(RequestStruct({
        fields: Schema.optional(
          Schema.String.pipe(Schema.pattern(/^[a-z_]+(,[a-z_]+)*$/, {
            message: () => "must be field names, comma separated"
          }))
        )
      }))
      .addSuccess(BusinessProfile)
      .pipe(
        accepts(instanceOnly),
        documented(
          "Read the business profile",
          "The WhatsApp business profile of the instance's phone number, from the upstream."
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

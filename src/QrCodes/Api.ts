/** QR codes of the instance's phone number (instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphList, GraphPagingFields, PassThrough } from "../Domain/Json.js"
import { RequestStruct } from "../Domain/Schemas.js"

const Fields = Schema.String.pipe(
  Schema.pattern(/^[a-z_]+(\.format\((SVG|PNG)\))?(,[a-z_]+(\.format\((SVG|PNG)\))?)*$/, {
    message: () => "must be field names, comma separated, such as code,prefilled_message,deep_link_url"
  })
)

const QrCodeListQuery = RequestStruct({
  ...GraphPagingFields,
  fields: Schema.optional(Fields)
})

/** `code` may be left out when `fields` does not ask for it. */
export const QrCode = PassThrough({
  code: Schema.optional(Schema.String),
  prefilled_message: Schema.optional(Schema.String),
  deep_link_url: Schema.optional(Schema.String)
})

export class QrCodesApi extends HttpApiGroup.make("qrCodes")
  .annotate(OpenApi.Description, "QR codes that open a chat with the phone number.")
  .add(
    HttpApiEndpoint.get("list", "/qr-codes")
      .setUrlParams(QrCodeListQuery)
      .addSuccess(GraphList(QrCode))
      .pipe(
        accepts(instanceOnly),
        documented(
          "List QR codes",
          "The phone number's QR codes from the upstream, with its paging cursors; `fields` picks the fields."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/qr-codes/:qrCodeId")
      .setPath(Schema.Struct({
        qrCodeId: Schema.String.pipe(
          Schema.pattern(/^[A-Za-z0-9]{1,64}$/, { message: () => "must be a QR code (letters and digits)" })
        )
      }))
      .setUrlParams(RequestStruct({ fields: Schema.optional(Fields) }))
      .addSuccess(QrCode)
      .pipe(accepts(instanceOnly), documented("Read a QR code", "One QR code of the phone number, by its code."))
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

/** Flows of the instance's business account and their assets (instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, Multipart, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, bodyLimit, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphId } from "../Domain/Ids.js"
import { GraphList, GraphPagingFields, JsonObjectSchema, PassThrough } from "../Domain/Json.js"
import { RequestStruct } from "../Domain/Schemas.js"
import { FLOW_ASSET_UPLOAD_LIMIT } from "../Media/MediaKinds.js"

const FlowListQuery = RequestStruct({
  ...GraphPagingFields
})

export const Flow = PassThrough({
  id: Schema.String,
  name: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
  categories: Schema.optional(Schema.Array(Schema.String)),
  validation_errors: Schema.optional(Schema.Array(JsonObjectSchema))
})

export const FlowAsset = PassThrough({
  name: Schema.String,
  asset_type: Schema.String,
  download_url: Schema.optional(Schema.String)
})

const FlowAssetUpload = HttpApiSchema.Multipart(
  RequestStruct({
    file: Multipart.SingleFileSchema.annotations({ message: () => "must be exactly one file part" }),
    name: Schema.String.pipe(
      Schema.pattern(/^[^/\\\x00-\x1f]{1,200}$/, { message: () => "must be a file name such as flow.json" })
    ),
    asset_type: Schema.Literal("FLOW_JSON", "IMAGE").annotations({
      message: () => ({ message: "must be FLOW_JSON or IMAGE", override: true })
    })
  }).pipe(
    Schema.filter((asset) =>
      asset.asset_type === "FLOW_JSON" && asset.name !== "flow.json"
        ? { path: ["name"], message: "must be flow.json for a FLOW_JSON asset" }
        : undefined
    ),
    Schema.annotations({ parseOptions: { errors: "all" }, identifier: "FlowAssetUpload" })
  ),
  // No parser size limits (the edge bounds the body as it streams); an application/json part is the flow file, not a text field.
  { fieldMimeTypes: [] }
)

const FlowAssetUploaded = Schema.Struct({ success: Schema.Boolean, validation_errors: Schema.Array(JsonObjectSchema) })

const FlowPath = Schema.Struct({ flowId: GraphId })

export class FlowsApi extends HttpApiGroup.make("flows")
  .annotate(OpenApi.Description, "WhatsApp Flows of the business account and their assets.")
  .add(
    HttpApiEndpoint.get("list", "/flows")
      .setUrlParams(FlowListQuery)
      .addSuccess(GraphList(Flow))
      .pipe(
        accepts(instanceOnly),
        documented("List flows", "The business account's flows, with the upstream's paging cursors.")
      )
  )
  .add(
    HttpApiEndpoint.get("assets", "/flows/:flowId/assets")
      .setPath(FlowPath)
      .addSuccess(GraphList(FlowAsset))
      .pipe(
        accepts(instanceOnly),
        documented("List a flow's assets", "The flow's files (its flow.json and images), each with a download URL.")
      )
  )
  .add(
    HttpApiEndpoint.post("uploadAsset", "/flows/:flowId/assets")
      .setPath(FlowPath)
      .setPayload(FlowAssetUpload)
      .addSuccess(FlowAssetUploaded)
      .addError(Wire.PayloadTooLarge)
      .addError(Wire.UnsupportedMediaType)
      .pipe(
        accepts(instanceOnly),
        bodyLimit(FLOW_ASSET_UPLOAD_LIMIT),
        documented(
          "Upload a flow asset",
          "multipart/form-data: `file` (flow.json, or a PNG or JPEG image), `name` (`flow.json` for the main file) and " +
            "`asset_type` (FLOW_JSON or IMAGE); at most 10 MB. The upstream's validation errors of the flow are in the answer."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("deprecate", "/flows/:flowId/deprecate")
      .setPath(FlowPath)
      .addSuccess(Schema.Struct({ success: Schema.Boolean }))
      .pipe(
        accepts(instanceOnly),
        documented("Deprecate a flow", "A PUBLISHED flow can no longer be sent; this cannot be undone.")
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  // Added before Authentication, so it runs after it: an unauthenticated caller gets 401, not 413.
  .middleware(Authentication)
{}

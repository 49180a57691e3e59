/** Message templates of the instance's business account (instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphId } from "../Domain/Ids.js"
import { GraphList, GraphPagingFields, JsonObjectSchema, JsonValue, PassThrough } from "../Domain/Json.js"
import { ForwardedRequest, RequestStruct } from "../Domain/Schemas.js"
import { componentIssues } from "./Components.js"

const TemplateCategory = Schema.Literal("MARKETING", "UTILITY", "AUTHENTICATION").annotations({
  message: () => ({ message: "must be MARKETING, UTILITY or AUTHENTICATION", override: true })
})

const CreateTemplate = ForwardedRequest({
  name: Schema.String.pipe(Schema.pattern(/^[a-z0-9_]{1,512}$/, {
    message: () => "must be snake_case: lowercase letters, digits and underscores, at most 512 characters"
  })),
  language: Schema.String.pipe(Schema.pattern(/^[a-z]{2,3}(_[A-Z]{2})?$/, {
    message: () => "must be a language code such as en, en_US or pt_BR"
  })),
  category: TemplateCategory,
  components: Schema.Array(JsonValue).pipe(Schema.minItems(1, { message: () => "must hold at least one component" }))
}).pipe(
  Schema.filter((template) => componentIssues(template.category, template.components)),
  Schema.annotations({ parseOptions: { errors: "all" }, identifier: "CreateTemplate" })
)

const TemplateCreated = Schema.Struct({ id: Schema.String, status: Schema.String, category: Schema.String })

const TemplateStatus = Schema.Literal(
  "APPROVED",
  "PENDING",
  "REJECTED",
  "PAUSED",
  "DISABLED",
  "IN_APPEAL",
  "PENDING_DELETION",
  "DELETED",
  "LIMIT_EXCEEDED",
  "ARCHIVED"
).annotations({
  message: () => ({ message: "must be a template status such as APPROVED, PENDING or REJECTED", override: true })
})

const TemplateListQuery = RequestStruct({
  ...GraphPagingFields,
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(512))),
  status: Schema.optional(TemplateStatus)
})

export const Template = PassThrough({
  id: Schema.String,
  name: Schema.optional(Schema.String),
  language: Schema.optional(Schema.String),
  category: Schema.optional(Schema.String),
  status: Schema.optional(Schema.String),
  components: Schema.optional(Schema.Array(JsonObjectSchema))
})

const TEMPLATE_EXAMPLE = {
  name: "order_update",
  language: "en_US",
  category: "UTILITY",
  components: [
    { type: "BODY", text: "Your order {{1}} has shipped.", example: { body_text: [["A-1042"]] } },
    { type: "FOOTER", text: "Thank you for your order" }
  ]
} as const

export class TemplatesApi extends HttpApiGroup.make("templates")
  .annotate(OpenApi.Description, "Message templates of the business account.")
  .add(
    HttpApiEndpoint.post("create", "/templates")
      .setPayload(CreateTemplate)
      .addSuccess(TemplateCreated)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(instanceOnly),
        documented(
          "Create a message template",
          "Submits a template to the upstream for approval; it is PENDING until approved (usually hours; in the sandbox, seconds). " +
            "Only APPROVED templates can be sent. Fields the hub does not model (`message_send_ttl_seconds`, `parameter_format`, " +
            "and whatever Meta adds) are forwarded to the Graph unchanged. The template's category is kept for routing sends " +
            "(the Marketing Messages API).",
          { example: TEMPLATE_EXAMPLE }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/templates")
      .setUrlParams(TemplateListQuery)
      .addSuccess(GraphList(Template))
      .pipe(
        accepts(instanceOnly),
        documented(
          "List message templates",
          "The business account's templates, with the upstream's paging cursors; filter by `name` and `status`."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/templates/:templateId")
      .setPath(Schema.Struct({ templateId: GraphId }))
      .addSuccess(Template)
      .pipe(
        accepts(instanceOnly),
        documented("Read a message template", "One template of the business account, by its id.")
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Schema } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { GraphList, limitText, PassThrough } from "../Domain/Json.js"
import { forwardedBody } from "../Domain/Schemas.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer, toHubErrorOrNotFound } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { Template } from "./Api.js"
import { learned, TemplateCategories } from "./Categories.js"

const Created = PassThrough({
  id: Schema.String,
  status: Schema.optional(Schema.String),
  category: Schema.optional(Schema.String)
})
const Names = GraphList(PassThrough({ id: Schema.String }))

export const TemplatesHttpLive = HttpApiBuilder.group(HubApi, "templates", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    const categories = yield* TemplateCategories

    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          // Fields the hub does not model (message_send_ttl_seconds, parameter_format, …) go to the Graph as given.
          const body = forwardedBody(payload, [])
          const created = yield* upstream.createTemplate(target, body).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(Created, "the template creation"))
          )
          // Graph may re-categorise a template; its answer wins over the request.
          const category = created.category ?? payload.category
          yield* categories.learn(
            learned(target.wabaId, [{ name: payload.name, language: payload.language, category }])
          )
          return { id: created.id, status: created.status ?? "PENDING", category }
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const query = { ...urlParams, limit: limitText(urlParams.limit) }
          const page = yield* upstream.listTemplates(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(Template), "the template list"))
          )
          // Every template read is a category the send routing can use (Meta's guide: read them with this API).
          yield* categories.learn(learned(target.wabaId, page.data))
          return page
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const notFound = new NotFound({ message: `template ${path.templateId} was not found`, error: "not_found" })
          const template = yield* upstream.getTemplate(target, path.templateId).pipe(
            Effect.mapError(toHubErrorOrNotFound(`template ${path.templateId}`)),
            Effect.flatMap(decodeAnswer(Template, "the template"))
          )
          // An access token may reach several business accounts: the template must be listed under this one.
          if (template.name === undefined) return yield* notFound
          const sameName = yield* upstream.listTemplates(target, { name: template.name, fields: "id", limit: "100" })
            .pipe(
              Effect.mapError(toHubError),
              Effect.flatMap(decodeAnswer(Names, "the template list"))
            )
          if (!sameName.data.some((t) => t.id === template.id)) return yield* notFound
          return template
        }))
  })).pipe(Layer.provide(TemplateCategories.Default))

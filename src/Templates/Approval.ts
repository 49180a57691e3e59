/**
 * Whether a template may be sent to many people (Broadcasts): the business account's template of that name
 * and language, read from the Graph (`GET /{waba-id}/message_templates?name=&language=`), must be APPROVED.
 * Asked once when a broadcast is created, so one that names a missing or unapproved template is refused
 * at once instead of becoming as many refused sends as it has recipients; the category it answers is
 * learned, so a MARKETING template is routed to the Marketing Messages API where the instance has it on.
 */
import { Effect } from "effect"
import { BadRequest } from "../Domain/Errors.js"
import { GraphList } from "../Domain/Json.js"
import { decodeAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import { Template } from "./Api.js"
import { languageKey, learned, TemplateCategories } from "./Categories.js"

const refused = (message: string, error: string) =>
  new BadRequest({
    message: `Invalid request: template: ${message}`,
    error,
    details: [{ field: "template", message }]
  })

export class TemplateApproval extends Effect.Service<TemplateApproval>()("TemplateApproval", {
  effect: Effect.gen(function*() {
    const upstream = yield* Upstream
    const categories = yield* TemplateCategories
    /** Succeeds when the template is APPROVED; a 400 saying why not, or the upstream's failure, otherwise. */
    const check = (target: UpstreamTarget, template: { readonly name: string; readonly language: string }) =>
      Effect.gen(function*() {
        const listed = yield* upstream.listTemplates(target, {
          name: template.name,
          language: template.language,
          fields: "name,language,status,category",
          limit: "100"
        }).pipe(Effect.mapError(toHubError), Effect.flatMap(decodeAnswer(GraphList(Template), "the template list")))
        yield* categories.learn(learned(target.wabaId, listed.data))
        // Meta's `name` filter matches parts of names: only the exact name and language count.
        const found = listed.data.find((t) =>
          t.name === template.name && t.language !== undefined &&
          languageKey(t.language) === languageKey(template.language)
        )
        if (found === undefined) {
          return yield* refused(
            `${template.name} (${template.language}) is not a template of the business account`,
            "template_not_found"
          )
        }
        if (found.status !== "APPROVED") {
          return yield* refused(
            `${template.name} (${template.language}) is ${
              found.status ?? "not approved"
            }: only APPROVED templates can be broadcast`,
            "template_not_approved"
          )
        }
      })
    return { check } as const
  }),
  dependencies: [TemplateCategories.Default]
}) {}

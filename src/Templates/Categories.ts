/**
 * Each template's category, for routing sends (Meta's guide "Route template messages by category",
 * September 2026): a MARKETING template goes to the Marketing Messages API when the instance has it
 * on, anything else to `/messages`. The map is kept per business account, name and language (a
 * template belongs to the business account, and every number of it sends the same one), learned from
 * the hub's own template calls, `message_template_status_update` (its `message_template_category`) and
 * the completed phase of `template_category_update` (`new_category`); the impending phase
 * (`correct_category`, `category_update_timestamp`) is for watching only and never routes.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { InstanceId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"
import { isoFromUnix } from "../Domain/UpstreamTime.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import type { SendEndpoint } from "../Upstream/Upstream.js"

export interface TemplateCategory {
  readonly wabaId: string
  readonly name: string
  readonly language: string
  /** Upper case, as Meta writes it: MARKETING, UTILITY, AUTHENTICATION. */
  readonly category: string
  /** When it was learned or, for an upstream change, when the upstream says it happened (ISO 8601). */
  readonly at: string
}

/** A category learned from an upstream change, applied in the ingress's transaction (see Messages/Repo.ts). */
export interface TemplateCategoryChange {
  readonly _tag: "TemplateCategory"
  readonly category: TemplateCategory
}

/** Meta writes a language `en_US` in sends and sometimes `en-US` in webhooks: one key for both. */
export const languageKey = (language: string) => language.replace("-", "_")

const text = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

const templateCategory = (input: {
  readonly wabaId: string
  readonly name: unknown
  readonly language: unknown
  readonly category: unknown
  readonly at: string
}): TemplateCategory | undefined => {
  const name = text(input.name)
  const language = text(input.language)
  const category = text(input.category)
  return name === undefined || language === undefined || category === undefined
    ? undefined
    : { wabaId: input.wabaId, name, language: languageKey(language), category: category.toUpperCase(), at: input.at }
}

/** The categories of templates the Graph named, as now. */
export const learned = (
  wabaId: string,
  templates: ReadonlyArray<{ readonly name?: unknown; readonly language?: unknown; readonly category?: unknown }>
) => {
  const at = new Date().toISOString()
  return templates.flatMap((t) => {
    const category = templateCategory({ wabaId, name: t.name, language: t.language, category: t.category, at })
    return category === undefined ? [] : [category]
  })
}

/** The category a template change of the business account `wabaId` settles, if any. */
export const templateCategoryOf = (
  wabaId: string | undefined,
  field: string | undefined,
  value: JsonObject,
  receivedAt: string
): TemplateCategory | undefined => {
  if (wabaId === undefined) return undefined
  const at = isoFromUnix(value.timestamp, receivedAt)
  const of = (category: unknown) =>
    templateCategory({
      wabaId,
      name: value.message_template_name,
      language: value.message_template_language,
      category,
      at
    })
  if (field === "message_template_status_update") return of(value.message_template_category)
  if (field === "template_category_update") {
    const impending = value.correct_category !== undefined || value.category_update_timestamp !== undefined
    return impending ? undefined : of(value.new_category)
  }
  return undefined
}

/** Keeps each category, the newest by its time: a late change never undoes a later one. */
export const recordTemplateCategories = (sql: SqlClient.SqlClient, categories: ReadonlyArray<TemplateCategory>) =>
  Effect.forEach(
    categories,
    (c) =>
      sql`INSERT INTO template_categories ${
        sql.insert({ waba_id: c.wabaId, name: c.name, language: c.language, category: c.category, updated_at: c.at })
      } ON CONFLICT (waba_id, name, language) DO UPDATE SET category = excluded.category, updated_at = excluded.updated_at
      WHERE excluded.updated_at >= template_categories.updated_at`,
    { discard: true }
  )

/** How a send chooses its endpoint: the request's `via`, else the instance's setting. */
export type Via = "auto" | SendEndpoint

/**
 * The endpoint a template send goes to. `via: "messages"` (or the instance's `off` without `via`)
 * never asks; otherwise the template's known category decides, one indexed read: MARKETING goes to
 * the Marketing Messages API, anything else, or an unknown template, to `/messages`.
 */
export const templateEndpoint = (
  sql: SqlClient.SqlClient,
  instanceId: InstanceId,
  template: { readonly name: string; readonly language: string },
  via: Via | undefined
): Effect.Effect<SendEndpoint> => {
  if (via === "messages" || via === "marketing_messages") return Effect.succeed(via)
  return sql<{ readonly marketing_messages: string; readonly category: string | null }>`SELECT i.marketing_messages,
      (SELECT t.category FROM template_categories t
        WHERE t.waba_id = i.waba_id AND t.name = ${template.name} AND t.language = ${
    languageKey(template.language)
  }) AS category
      FROM instances i WHERE i.id = ${instanceId}`.pipe(
    Effect.map((rows): SendEndpoint => {
      const row = rows[0]
      const routes = via === "auto" || row?.marketing_messages === "auto"
      return routes && row?.category === "MARKETING" ? "marketing_messages" : "messages"
    }),
    Effect.orDie
  )
}

/** The categories the hub's own template calls (create, list) learn, each in a write of its own. */
export class TemplateCategories extends Effect.Service<TemplateCategories>()("TemplateCategories", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batcher = yield* WriteBatcher
    return {
      learn: (categories: ReadonlyArray<TemplateCategory>) =>
        categories.length === 0 ? Effect.void : Effect.orDie(batcher.run(recordTemplateCategories(sql, categories)))
    }
  })
}) {}

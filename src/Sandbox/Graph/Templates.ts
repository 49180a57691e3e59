/**
 * Sandbox templates per WABA: created PENDING, APPROVED once the approval delay has passed
 * (computed on read from the creation time and the Clock, so TestClock and a 0 delay both work).
 */
import { Clock, Duration, Effect } from "effect"
import type { Json, JsonObject } from "../../Domain/Json.js"
import type { GraphQuery, UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { checkReserved, invalidParameter, unknownObject } from "./Failures.js"
import { numericId } from "./Ids.js"
import { page, selectFields } from "./Paging.js"

const CATEGORIES = ["MARKETING", "UTILITY", "AUTHENTICATION"]

interface StoredTemplate {
  readonly id: string
  readonly wabaId: string
  readonly name: string
  readonly language: string
  readonly category: string
  readonly components: ReadonlyArray<Json>
  readonly createdAt: number
}

export const makeTemplateStore = (approvalDelay: Duration.Duration) => {
  const templates: Array<StoredTemplate> = []

  const status = (template: StoredTemplate, now: number) =>
    now - template.createdAt >= Duration.toMillis(approvalDelay) ? "APPROVED" : "PENDING"

  const render = (template: StoredTemplate, now: number): JsonObject => ({
    name: template.name,
    language: template.language,
    status: status(template, now),
    category: template.category,
    components: template.components,
    id: template.id
  })

  const create = (target: UpstreamTarget, body: JsonObject): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.wabaId)
      const { category, components, language, name } = body
      if (typeof name !== "string" || !/^[a-z0-9_]{1,512}$/.test(name)) {
        return yield* Effect.fail(
          invalidParameter("Invalid parameter", "name must be lowercase letters, digits and underscores")
        )
      }
      if (typeof language !== "string" || language === "") {
        return yield* Effect.fail(invalidParameter("The parameter language is required."))
      }
      if (typeof category !== "string" || !CATEGORIES.includes(category.toUpperCase())) {
        return yield* Effect.fail(
          invalidParameter("Param category must be one of {MARKETING, UTILITY, AUTHENTICATION}")
        )
      }
      if (!Array.isArray(components) || components.length === 0) {
        return yield* Effect.fail(invalidParameter("The parameter components is required."))
      }
      if (templates.some((t) => t.wabaId === target.wabaId && t.name === name && t.language === language)) {
        return yield* Effect.fail(invalidParameter(
          "Invalid parameter",
          `Message template "${name}" already exists in ${language}: choose another name or language.`,
          2388024
        ))
      }
      const now = yield* Clock.currentTimeMillis
      const template: StoredTemplate = {
        id: numericId(15),
        wabaId: target.wabaId,
        name,
        language,
        category: category.toUpperCase(),
        components,
        createdAt: now
      }
      templates.push(template)
      return { id: template.id, status: status(template, now), category: template.category }
    })

  const list = (target: UpstreamTarget, query: GraphQuery) =>
    Effect.gen(function*() {
      yield* checkReserved(target.wabaId)
      const now = yield* Clock.currentTimeMillis
      const items = templates
        .filter((t) => t.wabaId === target.wabaId)
        .map((t) => render(t, now))
        .filter((t) =>
          (query.name === undefined || String(t.name).includes(query.name)) &&
          (query.status === undefined || t.status === query.status.toUpperCase()) &&
          (query.language === undefined || t.language === query.language) &&
          (query.category === undefined || t.category === query.category.toUpperCase())
        )
      return yield* page(items, query, { link: `https://graph.facebook.com/v23.0/${target.wabaId}/message_templates` })
    })

  const get = (target: UpstreamTarget, templateId: string, query: GraphQuery = {}) =>
    Effect.gen(function*() {
      yield* checkReserved(target.wabaId, templateId)
      const template = templates.find((t) => t.id === templateId && t.wabaId === target.wabaId)
      if (template === undefined) return yield* Effect.fail(unknownObject(templateId))
      return selectFields(render(template, yield* Clock.currentTimeMillis), query.fields)
    })

  /** The APPROVED template a send names, if any (name and language code must both match). */
  const approved = (wabaId: string, name: string, language: string) =>
    Effect.map(
      Clock.currentTimeMillis,
      (now) =>
        templates.find((t) =>
          t.wabaId === wabaId && t.name === name && t.language === language && status(t, now) === "APPROVED"
        )
    )

  return { create, list, get, approved }
}

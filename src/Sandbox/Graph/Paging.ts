/** Graph cursor paging (`limit`, `after`, `before`) and `fields` selection over in-memory lists. */
import { Effect } from "effect"
import type { Json, JsonObject } from "../../Domain/Json.js"
import type { GraphQuery } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { invalidParameter } from "./Failures.js"

const encodeCursor = (index: number) => Buffer.from(`sandbox:${index}`).toString("base64")
const decodeCursor = (cursor: string): number | undefined => {
  const match = /^sandbox:(\d+)$/.exec(Buffer.from(cursor, "base64").toString("utf8"))
  return match === null ? undefined : Number(match[1])
}

/** `fields=code,qr_image_url.format(SVG)` → ["code", "qr_image_url"]; undefined when no selection was asked. */
const fieldNames = (fields: string | undefined): ReadonlyArray<string> | undefined => {
  if (fields === undefined || fields.trim() === "") return undefined
  return fields.split(",").map((f) => f.trim().replace(/[.{(].*$/, "")).filter((f) => f !== "")
}

/** Keeps the asked-for fields (and `id`, which Graph always returns for nodes). */
export const selectFields = (item: JsonObject, fields: string | undefined): JsonObject => {
  const names = fieldNames(fields)
  if (names === undefined) return item
  const selected: Record<string, Json> = {}
  for (const [key, value] of Object.entries(item)) if (key === "id" || names.includes(key)) selected[key] = value
  return selected
}

const parseLimit = (query: GraphQuery, fallback: number, max: number): Effect.Effect<number, UpstreamError> => {
  const raw = query.limit
  if (raw === undefined || raw === "") return Effect.succeed(fallback)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 1 && n <= max
    ? Effect.succeed(n)
    : Effect.fail(invalidParameter(`Param limit must be an integer from 1 to ${max}`))
}

/** One page of `items` as `{data, paging: {cursors, next?, previous?}}`. */
export const page = (
  items: ReadonlyArray<JsonObject>,
  query: GraphQuery,
  options: { readonly defaultLimit?: number; readonly maxLimit?: number; readonly link: string }
): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.gen(function*() {
    const limit = yield* parseLimit(query, options.defaultLimit ?? 25, options.maxLimit ?? 100)
    let start = 0
    if (query.after !== undefined) {
      const at = decodeCursor(query.after)
      if (at === undefined) return yield* Effect.fail(invalidParameter("Invalid after cursor"))
      start = at + 1
    } else if (query.before !== undefined) {
      const at = decodeCursor(query.before)
      if (at === undefined) return yield* Effect.fail(invalidParameter("Invalid before cursor"))
      start = Math.max(0, at - limit)
    }
    const end = query.before !== undefined && query.after === undefined
      ? Math.min(items.length, decodeCursor(query.before) ?? 0)
      : start + limit
    const data = items.slice(start, end).map((item) => selectFields(item, query.fields))
    if (data.length === 0) return { data: [] }
    const first = start
    const last = start + data.length - 1
    const link = (param: string, cursor: string) =>
      `${options.link}?limit=${limit}&${param}=${encodeURIComponent(cursor)}`
    return {
      data,
      paging: {
        cursors: { before: encodeCursor(first), after: encodeCursor(last) },
        ...(last < items.length - 1 ? { next: link("after", encodeCursor(last)) } : {}),
        ...(first > 0 ? { previous: link("before", encodeCursor(first)) } : {})
      }
    }
  })

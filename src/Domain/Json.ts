/**
 * JSON values as Schemas, for bodies the hub passes through from the upstream unchanged
 * (Graph envelopes, settings objects) while still describing their known fields.
 */
import { Schema } from "effect"

/** A JSON value as parsed from the wire (what JSON.parse returns, typed). */
export type Json = string | number | boolean | null | JsonObject | ReadonlyArray<Json>
export interface JsonObject {
  readonly [key: string]: Json
}

/**
 * The one JSON guard. Values that come from JSON.parse are JSON already (it makes nothing else), so
 * only their shape is asked: whether a value is an object. Values of unknown origin are checked with
 * the schemas below (JsonValue), which walk the whole value: about 35 µs for an upstream post,
 * against 3 µs for its JSON.parse, so the hot paths parse and ask the shape instead.
 */
export const isJsonObject = (value: Json | undefined): value is JsonObject =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Whether an unknown value is a plain object (not an array, not null): its fields are then readable. */
export const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** Parses text as a JSON object; anything else (invalid JSON, an array, a scalar) is undefined. */
export const parseJsonObject = (text: string): JsonObject | undefined => {
  try {
    // JSON.parse yields JSON values only: its result is typed as what it is.
    const parsed: Json = JSON.parse(text)
    return isJsonObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

export const JsonValue: Schema.Schema<Json> = Schema.suspend(() =>
  Schema.Union(Schema.Null, Schema.Boolean, Schema.Number, Schema.String, Schema.Array(JsonValue), JsonObjectSchema)
).annotations({ identifier: "JsonValue" })

export const JsonObjectSchema: Schema.Schema<JsonObject> = Schema.Record({ key: Schema.String, value: JsonValue })

/** The other keys of an object whose known fields a Struct names; they are kept, not dropped. */
export const OtherKeys = Schema.Record({ key: Schema.String, value: JsonValue })

const Cursors = Schema.Struct(
  { before: Schema.optional(Schema.String), after: Schema.optional(Schema.String) },
  OtherKeys
)

/** Graph cursor paging, kept as the upstream sent it. */
const Paging = Schema.Struct({ cursors: Schema.optional(Cursors) }, OtherKeys)

/** A Graph list envelope `{data[], paging?}` passed through unchanged (other keys too). */
export const GraphList = <A extends JsonObject, I, R>(item: Schema.Schema<A, I, R>) =>
  Schema.Struct({ data: Schema.Array(item), paging: Schema.optional(Paging) }, OtherKeys)

/** A Graph object described by some known fields; every other field is passed through. */
export const PassThrough = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields, OtherKeys).annotations({ message: () => "must be an object" })

/** Graph's `limit` query: a whole number of items from 1 to 100, given as text. */
export const GraphLimit = Schema.NumberFromString.pipe(
  Schema.filter((n) => Number.isInteger(n) && n >= 1 && n <= 100, {
    message: () => "must be a whole number from 1 to 100"
  })
)

/** Graph cursor paging and field selection, as list endpoints take them in their query. */
export const GraphPagingFields = {
  fields: Schema.optional(Schema.String.pipe(Schema.maxLength(500))),
  limit: Schema.optional(GraphLimit),
  after: Schema.optional(Schema.String),
  before: Schema.optional(Schema.String)
}

/** A decoded `limit` as the text the upstream query takes. */
export const limitText = (
  limit: number | undefined
): string | undefined => (limit === undefined ? undefined : String(limit))

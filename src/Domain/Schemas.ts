/** Schema helpers shared by the feature contracts. */
import { Schema } from "effect"
import { type Json, type JsonObject, OtherKeys } from "./Json.js"

/**
 * A request body or query: every failing field is reported (not only the first),
 * and unknown keys are ignored rather than refused, as the upstream does.
 */
export const RequestStruct = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { errors: "all", onExcessProperty: "ignore" } })

/**
 * A request body the hub forwards to the Graph: the fields it models are checked, and every other
 * key is kept as given (any JSON) and forwarded unchanged, so the Graph receives what the caller
 * sent, new fields of Meta's included. The hub's own keys are left out with `forwardedBody`.
 */
export const ForwardedRequest = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields, OtherKeys).annotations({ parseOptions: { errors: "all" } })

/** A forwarded request's body less the hub's own keys (which instance it is for, and the like). */
export const forwardedBody = (
  request: { readonly [key: string]: Json | undefined },
  hubKeys: ReadonlyArray<string>
): JsonObject => {
  const own: ReadonlySet<string> = new Set(hubKeys)
  const body: Record<string, Json> = {}
  for (const [key, value] of Object.entries(request)) if (value !== undefined && !own.has(key)) body[key] = value
  return body
}

/** A trimmed, non-empty label of at most `max` characters. */
export const Label = (max: number) =>
  Schema.Trim.pipe(
    Schema.nonEmptyString({ message: () => "must not be empty" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` })
  )

/** A query's whole number from `min` to `max`, given as digits; anything else fails with one message naming the range. */
export const WholeNumberText = (min: number, max: number) => {
  const rule = `must be a whole number from ${min} to ${max}`
  return Schema.transform(
    Schema.String.pipe(Schema.pattern(/^\d{1,9}$/, { message: () => rule })),
    Schema.Int.pipe(Schema.between(min, max, { message: () => rule })),
    { strict: true, decode: (text) => Number(text), encode: (n) => String(n) }
  )
}

/** An id taken from a path or a body, checked only for being a plausible token. */
export const IdString = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_.:@=+\-]{1,200}$/, { message: () => "must be an identifier" })
)

export const IsoTimestamp = Schema.String.annotations({
  description: "ISO 8601 timestamp",
  examples: ["2026-11-21T14:00:00.000Z"]
})

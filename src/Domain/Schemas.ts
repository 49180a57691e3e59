/** Schema helpers shared by the feature contracts. */
import { Schema } from "effect"

/**
 * A request body or query: every failing field is reported (not only the first),
 * and unknown keys are ignored rather than refused, as the upstream does.
 */
export const RequestStruct = <Fields extends Schema.Struct.Fields>(fields: Fields) =>
  Schema.Struct(fields).annotations({ parseOptions: { errors: "all", onExcessProperty: "ignore" } })

/** A trimmed, non-empty label of at most `max` characters. */
export const Label = (max: number) =>
  Schema.Trim.pipe(
    Schema.nonEmptyString({ message: () => "must not be empty" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` })
  )

/** An id taken from a path or a body, checked only for being a plausible token. */
export const IdString = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_.:@=+\-]{1,200}$/, { message: () => "must be an identifier" })
)

export const IsoTimestamp = Schema.String.annotations({ description: "ISO 8601 timestamp", examples: ["2026-11-21T14:00:00.000Z"] })

/**
 * Column schemas for decoding rows at a repository's boundary, so the engines' differences stay
 * here: SQLite has no boolean (0/1, and EXISTS is 1) where PostgreSQL answers true/false, and
 * PostgreSQL answers COUNT(*) and SUM as bigint, which its driver gives as a numeric string.
 * Callers of a repository only ever see the decoded types.
 */
import { Effect, Schema } from "effect"

/** A boolean column or expression: 0/1 on SQLite, true/false on PostgreSQL. */
export const SqlBoolean = Schema.transform(Schema.Union(Schema.Boolean, Schema.Literal(0, 1)), Schema.Boolean, {
  strict: true,
  decode: (stored) => stored === true || stored === 1,
  encode: (value) => value
})

/** A bigint column or expression (a sequence, COUNT, SUM): a number on SQLite, a numeric string on PostgreSQL. */
export const SqlBigint = Schema.Union(Schema.Number, Schema.NumberFromString)

/** A count, sum or maximum, where NULL (an empty SUM or MAX) is 0. */
export const SqlCount = Schema.transform(Schema.NullOr(SqlBigint), Schema.Number, {
  strict: true,
  decode: (stored) => stored ?? 0,
  encode: (value) => value
})

/**
 * Decodes a statement's rows with `schema`; a row that does not fit is a defect (the schema and the
 * migrations disagree), not a failure a caller could handle.
 */
export const decodeRows = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(schema))
  return <E, R>(rows: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
    Effect.flatMap(rows, (stored) => Effect.orDie(decode(stored)))
}

/** The rows of a `SELECT COUNT(*) AS n …`. */
export const countRows = decodeRows(Schema.Struct({ n: SqlCount }))

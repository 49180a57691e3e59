/**
 * What operator commands print on stdout: one record as indented JSON, encoded with its schema
 * (the HTTP API's own where the API answers with the same record, so the two cannot drift).
 */
import { Console, Effect, Schema } from "effect"

/** Prints `record` as `schema` encodes it; a record its schema refuses is a defect of the command. */
export const printWith = <A, I>(schema: Schema.Schema<A, I>) => (record: A) =>
  Schema.encode(schema)(record).pipe(
    Effect.orDie,
    Effect.flatMap((encoded) => Console.log(JSON.stringify(encoded, null, 2)))
  )

/**
 * Upstream changes kept aside for the operator (`hub events unrouted`): for phone numbers no instance
 * is bound to (`reason` null), and replays older than the dedupe horizon (`reason` "stale").
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Schema } from "effect"
import { IsoTimestamp } from "../Domain/Schemas.js"

/** One change kept aside, as `hub events unrouted` prints it. */
export const UnroutedChange = Schema.Struct({
  id: Schema.String,
  phone_number_id: Schema.NullOr(Schema.String),
  waba_id: Schema.NullOr(Schema.String),
  field: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  change: Schema.Unknown,
  received_at: IsoTimestamp
})

export type UnroutedChange = typeof UnroutedChange.Type

interface UnroutedRow {
  readonly id: string
  readonly phone_number_id: string | null
  readonly waba_id: string | null
  readonly field: string | null
  readonly reason: string | null
  readonly change_json: string
  readonly received_at: string
}

export class UnroutedRepo extends Context.Tag("UnroutedRepo")<UnroutedRepo, {
  /** The newest `limit` unrouted changes, newest first. */
  readonly list: (limit: number) => Effect.Effect<ReadonlyArray<UnroutedChange>>
}>() {}

export const UnroutedRepoLive = Layer.effect(
  UnroutedRepo,
  Effect.map(SqlClient.SqlClient, (sql) =>
    UnroutedRepo.of({
      list: (limit) =>
        sql<UnroutedRow>`SELECT id, phone_number_id, waba_id, field, reason, change_json, received_at
          FROM unrouted_events ORDER BY id DESC LIMIT ${limit}`.pipe(
          Effect.map((rows) => rows.map(({ change_json, ...row }) => ({ ...row, change: JSON.parse(change_json) }))),
          Effect.orDie
        )
    }))
)

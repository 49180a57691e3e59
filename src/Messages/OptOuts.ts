/**
 * Who stopped a business account's marketing messages (`marketing_opt_outs`, migration 0020): learned from
 * `user_preferences` webhooks (`stop`; `resume` and `signup` end it) and from Meta's 131050 refusing a send,
 * by every identifier the change names (number and business-scoped user id). Broadcasts skip them
 * (Broadcasts/Broadcasts.ts).
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Effect, Schema } from "effect"
import { isJsonObject, type JsonObject } from "../Domain/Json.js"
import { decodeRows } from "../Sql/RowSchemas.js"

/** Meta's code for a send to a user who stopped the business's marketing messages. */
export const OPTED_OUT_CODE = 131050

/** A person's marketing preference of a business account changed. */
export interface OptOutChange {
  readonly _tag: "OptOut"
  readonly wabaId: string
  readonly party: string
  /** True: they stopped; false: they resumed (or signed up). */
  readonly stopped: boolean
  readonly at: string
}

const text = (value: unknown) => (typeof value === "string" && value !== "" ? value : undefined)

/** The preferences a `user_preferences` change of the business account `wabaId` tells of. */
export const optOutsOf = (
  wabaId: string | undefined,
  field: string | undefined,
  value: JsonObject,
  at: string
): ReadonlyArray<OptOutChange> => {
  if (wabaId === undefined || field !== "user_preferences" || !Array.isArray(value.user_preferences)) return []
  return value.user_preferences.filter(isJsonObject).flatMap((preference) => {
    if (preference.category !== "marketing_messages") return []
    const choice = text(preference.value)
    if (choice !== "stop" && choice !== "resume" && choice !== "signup") return []
    const parties = [text(preference.wa_id), text(preference.user_id)].flatMap((p) => (p === undefined ? [] : [p]))
    return parties.map((party): OptOutChange => ({ _tag: "OptOut", wabaId, party, stopped: choice === "stop", at }))
  })
}

/** Applies preference changes in order (a later one for the same person wins). */
export const recordOptOuts = (
  sql: SqlClient.SqlClient,
  changes: ReadonlyArray<OptOutChange>
): Effect.Effect<void, SqlError.SqlError> =>
  Effect.forEach(changes, (change) =>
    change.stopped
      ? sql`INSERT INTO marketing_opt_outs ${
        sql.insert({
          waba_id: change.wabaId,
          party: change.party,
          opted_out_at: change.at
        })
      } ON CONFLICT (waba_id, party) DO NOTHING`
      : sql`DELETE FROM marketing_opt_outs WHERE waba_id = ${change.wabaId} AND party = ${change.party}`, {
    discard: true
  })

const decodeParties = decodeRows(Schema.Struct({ party: Schema.String }))

/** Which of `parties` stopped the business account's marketing messages. */
export const optedOutAmong = (sql: SqlClient.SqlClient, wabaId: string, parties: ReadonlyArray<string>) =>
  parties.length === 0
    ? Effect.succeed(new Set<string>())
    : Effect.map(
      decodeParties(
        sql`SELECT party FROM marketing_opt_outs WHERE waba_id = ${wabaId} AND ${sql.in("party", [...parties])}`
      ),
      (rows) => new Set(rows.map((row) => row.party))
    )

/**
 * Each number's throughput level as the Graph last said it, and when (`number_throughput`, migration
 * 0019): shared by the replicas and kept over restarts (PhoneNumbers/Throughput.ts reads and writes it).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { decodeRows, SqlBigint } from "../Sql/RowSchemas.js"

/** The `checked_at` of a level known to be out of date: never fresh, whatever the clock says. */
export const STALE = -1

/**
 * Meta upgraded a number of these business accounts (a `phone_number_quality_update` with `THROUGHPUT_UPGRADE`,
 * which names the number by its display number only): every level of their numbers is marked stale, so each is
 * read from the Graph again at its next use, on every replica within PhoneNumbers/Throughput.ts's RECHECK_MS.
 */
export const expireLevels = (sql: SqlClient.SqlClient, wabaIds: ReadonlyArray<string>) =>
  wabaIds.length === 0 ? Effect.void : sql`UPDATE number_throughput SET checked_at = ${STALE}
    WHERE phone_number_id IN (SELECT phone_number_id FROM instances WHERE ${sql.in("waba_id", [...new Set(wabaIds)])})`
    .pipe(Effect.asVoid)

/** A change that marks the levels of a business account's numbers stale (see expireLevels). */
export interface ThroughputUpgradeChange {
  readonly _tag: "ThroughputUpgrade"
  readonly wabaId: string
}

/** The upgrade a change of the business account `wabaId` tells of, if any. */
export const throughputUpgradeOf = (
  wabaId: string | undefined,
  field: string | undefined,
  event: unknown
): ThroughputUpgradeChange | undefined =>
  wabaId !== undefined && field === "phone_number_quality_update" && event === "THROUGHPUT_UPGRADE"
    ? { _tag: "ThroughputUpgrade", wabaId }
    : undefined

const decodeLevel = decodeRows(Schema.Struct({ level: Schema.String, checked_at: SqlBigint }))
const decodeLevels = decodeRows(Schema.Struct({ phone_number_id: Schema.String, level: Schema.String }))

export class ThroughputRepo extends Effect.Service<ThroughputRepo>()("ThroughputRepo", {
  effect: Effect.map(SqlClient.SqlClient, (sql) => ({
    /** A number's level as last read, and when. */
    levelOf: (phoneNumberId: string) =>
      Effect.map(
        decodeLevel(sql`SELECT level, checked_at FROM number_throughput WHERE phone_number_id = ${phoneNumberId}`),
        (rows) => rows[0]
      ),
    /** Every number's level as last read (a small table: one row per number ever used). */
    levels: Effect.map(
      decodeLevels(sql`SELECT phone_number_id, level FROM number_throughput`),
      (rows) => new Map(rows.map((row) => [row.phone_number_id, row.level]))
    ),
    save: (phoneNumberId: string, level: string, checkedAt: number) =>
      sql`INSERT INTO number_throughput ${sql.insert({ phone_number_id: phoneNumberId, level, checked_at: checkedAt })}
        ON CONFLICT (phone_number_id) DO UPDATE SET level = ${level}, checked_at = ${checkedAt}`.pipe(Effect.asVoid)
  }))
}) {}

/**
 * Idempotency-Keys, one mechanism for every kind of request that takes one: a key is kept per scope
 * (the instance of a send, the webhook of a test event) for a window (24 hours, 10 minutes), with
 * what the first request left for its repeats (a send's answer, a test's delivery). Each kind keeps
 * its own table (idempotency_keys, webhook_tests), of the same shape: the scope's column, the key,
 * the kind's own columns and created_at, its primary key (scope, key). Within the window a key is
 * held; past it the next request with the key takes it over, and `purge` drops it.
 */
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Duration, Effect, Option, Schema } from "effect"
import { decodeRows } from "./RowSchemas.js"

/** One kind of key: its table, the column of its scope, its window, and its own columns (decoded as read). */
export interface KeyKind<Held, Stored> {
  readonly table: string
  readonly scopeColumn: string
  readonly window: Duration.Duration
  readonly held: Schema.Schema<Held, Stored>
  readonly columns: ReadonlyArray<keyof Held & string>
}

/** A key of one scope: the instance's, the webhook's. */
export interface ScopedKey {
  readonly scope: string
  readonly key: string
}

/** What claiming a key did: it is this request's now, another request holds it (with what it left), or it just changed hands. */
export type KeyClaim<Held> =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Held"; readonly held: Held }
  /** Dropped or taken over by another request between this one's reads: the caller answers as for a request in flight. */
  | { readonly _tag: "Busy" }

/** A key's columns as written: text, numbers, NULL. */
type Columns = Readonly<Record<string, string | number | null>>

/** The keys of one kind, on `sql` (a transaction's statements run in it). */
export const keysOf = <Held, Stored>(sql: SqlClient.SqlClient, kind: KeyKind<Held, Stored>) => {
  const table = sql(kind.table)
  const scopeColumn = sql(kind.scopeColumn)
  const heldColumns = sql.literal(kind.columns.join(", "))
  const heldRows = decodeRows(kind.held)
  const createdRows = decodeRows(Schema.Struct({ created_at: Schema.String }))
  const cutoff = (at: Date) => new Date(at.getTime() - Duration.toMillis(kind.window)).toISOString()
  const matching = (ref: ScopedKey) => sql`${scopeColumn} = ${ref.scope} AND idempotency_key = ${ref.key}`

  /** The key's row, with its creation time, whether held or expired. */
  const stored = (ref: ScopedKey) =>
    Effect.gen(function*() {
      const rows = yield* sql`SELECT ${heldColumns}, created_at FROM ${table} WHERE ${matching(ref)}`
      const [held] = yield* heldRows(Effect.succeed(rows))
      const [time] = yield* createdRows(Effect.succeed(rows))
      return held === undefined || time === undefined ? undefined : { held, createdAt: time.created_at }
    })

  /** What the key holds, if a request took it within the window before `at`. */
  const find = (ref: ScopedKey, at: Date): Effect.Effect<Option.Option<Held>, SqlError.SqlError> =>
    Effect.map(
      stored(ref),
      (row) => (row !== undefined && row.createdAt >= cutoff(at) ? Option.some(row.held) : Option.none())
    )

  /** Takes the key with `held` (its kind's columns), or says who holds it; an expired key is taken over. */
  const claim = (ref: ScopedKey, held: Held & Columns, at: Date): Effect.Effect<KeyClaim<Held>, SqlError.SqlError> =>
    Effect.gen(function*() {
      const now = at.toISOString()
      const inserted = yield* sql<{ readonly created_at: string }>`INSERT INTO ${table} ${
        sql.insert({ ...held, [kind.scopeColumn]: ref.scope, idempotency_key: ref.key, created_at: now })
      } ON CONFLICT (${scopeColumn}, idempotency_key) DO NOTHING RETURNING created_at`
      if (inserted.length > 0) return { _tag: "Claimed" } as const
      const existing = yield* stored(ref)
      if (existing === undefined) return { _tag: "Busy" } as const
      if (existing.createdAt >= cutoff(at)) return { _tag: "Held", held: existing.held } as const
      // Expired: take it over, unless another request did so first.
      const taken = yield* sql<{ readonly created_at: string }>`UPDATE ${table} SET ${
        sql.update({ ...held, created_at: now })
      }
        WHERE ${matching(ref)} AND created_at = ${existing.createdAt} RETURNING created_at`
      return taken.length > 0 ? { _tag: "Claimed" } as const : { _tag: "Busy" } as const
    })

  /** Stores more of what the key holds (a send's final answer). */
  const update = (ref: ScopedKey, held: Partial<Held> & Columns) =>
    Effect.asVoid(sql`UPDATE ${table} SET ${sql.update(held)} WHERE ${matching(ref)}`)

  /** Gives the key up, when `condition` holds of its row, so the next request with it is processed afresh. */
  const release = (ref: ScopedKey, condition: Statement.Fragment) =>
    Effect.asVoid(sql`DELETE FROM ${table} WHERE ${matching(ref)} AND ${condition}`)

  /** Drops the keys past their window at `at`: every scope's, or one scope's. */
  const purge = (at: Date, scope?: string) =>
    Effect.asVoid(
      scope === undefined
        ? sql`DELETE FROM ${table} WHERE created_at < ${cutoff(at)}`
        : sql`DELETE FROM ${table} WHERE ${scopeColumn} = ${scope} AND created_at < ${cutoff(at)}`
    )

  return { find, claim, update, release, purge }
}

/**
 * Word between replicas, on PostgreSQL: LISTEN/NOTIFY. A replica announces inside the transaction
 * that makes the news (PostgreSQL delivers a notification only if, and once, that transaction
 * commits, to every listening session, the announcer's own included), and each replica listens on
 * one connection of its pool and acts at once. On SQLite there is one process and nothing to tell:
 * announcing runs no statement and listening hears nothing.
 *
 * `PgClient.notify` is not used: it sends `NOTIFY channel, $1`, and PostgreSQL takes no bound
 * parameters in NOTIFY; `SELECT pg_notify($1, $2)` does the same and takes them.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Option, Schedule, type Scope, Stream } from "effect"
import { isPostgres } from "./Dialect.js"

/** The channels replicas talk on. */
export const channels = {
  /** Deliveries were queued (not handed to the committing replica's dispatcher), or released: lease them. */
  outbox: "hub_outbox",
  /** A credential was revoked: its token hash is the payload; forget it. */
  credentials: "hub_credentials"
} as const

export type Channel = (typeof channels)[keyof typeof channels]

/** Tells every replica `payload` (non-empty, at most 8,000 bytes) once the current transaction commits; nothing on SQLite. */
export const announce = (sql: SqlClient.SqlClient, channel: Channel, payload: string): Effect.Effect<void, SqlError.SqlError> =>
  isPostgres(sql) ? Effect.asVoid(sql`SELECT pg_notify(${channel}, ${payload})`) : Effect.void

/**
 * Calls `onPayload` with every announcement on `channel` while the scope lasts; on SQLite, never.
 * `onConnected` runs each time listening (re)starts: announcements made while it was down were
 * missed, so a cache should start over then.
 */
export const subscribe = (
  channel: Channel,
  onPayload: (payload: string) => void,
  onConnected: () => void = () => {}
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.serviceOption(PgClient.PgClient), (pg) =>
    Option.match(pg, {
      onNone: () => Effect.void,
      onSome: (client) =>
        Stream.suspend(() => {
          onConnected()
          return client.listen(channel)
        }).pipe(
          Stream.runForEach((payload) => Effect.sync(() => onPayload(payload))),
          Effect.tapErrorCause((cause) => Effect.logWarning(`Listening on ${channel} failed; listening again`, cause)),
          Effect.retry(Schedule.spaced("1 second")),
          Effect.forkScoped,
          Effect.asVoid
        )
    }))

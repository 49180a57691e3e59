/**
 * Two transactions meeting on a row, on PostgreSQL: one held open after its statement ran, and a
 * wait until another connection's statement waits for a lock (on the real clock: it.live).
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Deferred, Effect, Fiber, Schedule } from "effect"

/** Waits until another connection's statement starting with `prefix` waits for a lock. */
export const waitingForLock = (prefix: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly n: number }>`SELECT COUNT(*)::int AS n FROM pg_stat_activity
      WHERE wait_event_type = 'Lock' AND query LIKE ${`${prefix}%`}`.pipe(
        Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (rows) => (rows[0]?.n ?? 0) > 0 }),
        Effect.timeout("10 seconds")
      )
  )

/**
 * Runs `statement` in a transaction held open until the returned `commit` (which waits for it to
 * end): the statement has run once this returns.
 */
export const heldOpen = <R>(statement: Effect.Effect<unknown, SqlError.SqlError, R>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const ran = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const transaction = yield* sql.withTransaction(Effect.gen(function*() {
      yield* statement
      yield* Deferred.succeed(ran, undefined)
      yield* Deferred.await(release)
    })).pipe(Effect.fork)
    yield* Deferred.await(ran)
    return { commit: Effect.zipRight(Deferred.succeed(release, undefined), Fiber.join(transaction)) }
  })

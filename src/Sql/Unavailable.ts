/**
 * The database failing (PostgreSQL restarting or unreachable, its connections terminated; a SQLite
 * file that cannot be written): an SqlError, whether a caller failed with it or died of it after
 * `orDie`. The edge answers it 503 storage_unavailable with Retry-After (Edge/Middleware.ts), while a
 * statement at fault (a constraint, a syntax error) stays a 500, a bug a retry would not mend; a write
 * that must not be lost once its outcome is known (a send Meta accepted) is tried again until the
 * database takes it (`untilStored`).
 */
import { Cause, Duration, Effect, Option, Predicate, Schedule } from "effect"

/**
 * Error codes of a database that cannot take work now, as opposed to a statement at fault (a
 * constraint, a syntax error). SQLite: a full disk, an I/O error, no memory, locked past the busy
 * timeout, a read-only or unopenable file; each may end the whole transaction. PostgreSQL SQLSTATE
 * classes: 08 connection, 53 insufficient resources (disk full), 57 operator intervention (a
 * shutdown, terminated backends, still starting), 58 system error; 25006 a read-only transaction
 * (a standby after a failover).
 */
const UNAVAILABLE_CODE = /^(SQLITE_(FULL|IOERR|NOMEM|BUSY|READONLY|CANTOPEN|CORRUPT|NOTADB)|08|53|57|58|25006)/

/** A database's own code (SQLITE_…, or a five-character SQLSTATE), if the error has one. */
const DATABASE_CODE = /^(SQLITE_|[0-9A-Z]{5}$)/

/**
 * SQLite's word that a transaction it ended itself (on one of the codes above) is gone: a write that
 * swallowed the first error leaves the next COMMIT or savepoint to say it.
 */
const TRANSACTION_GONE = /no transaction is active|no such savepoint/

/** The SqlError in `u` (or causing it) if it says the database is unavailable; a socket error or no code at all is too. */
const unavailableError = (u: unknown, depth = 0): Option.Option<unknown> => {
  if (Predicate.isTagged(u, "SqlError")) {
    const cause = Predicate.hasProperty(u, "cause") ? u.cause : undefined
    const code = Predicate.hasProperty(cause, "code") ? cause.code : undefined
    const message = Predicate.hasProperty(cause, "message") ? String(cause.message) : ""
    return typeof code !== "string" || UNAVAILABLE_CODE.test(code) || !DATABASE_CODE.test(code) ||
        TRANSACTION_GONE.test(message)
      ? Option.some(u)
      : Option.none()
  }
  return depth < 3 && Predicate.hasProperty(u, "cause") ? unavailableError(u.cause, depth + 1) : Option.none()
}

/**
 * The database's error in `cause` if the database is unavailable (unreachable, restarting, full,
 * read-only), not a statement's fault: what readiness, a batch's end and `untilStored` go by.
 */
export const unavailableOf = (cause: Cause.Cause<unknown>): Option.Option<unknown> =>
  Cause.find(
    cause,
    (reason) =>
      unavailableError(Cause.isFailType(reason) ? reason.error : Cause.isDieType(reason) ? reason.defect : undefined)
  )

/**
 * Tries again after 250 ms, doubling to every 5 s, for up to 10 minutes: a restart or a failover
 * takes seconds to a minute; past that an operator is needed, and the failure is logged.
 */
const STORAGE_BACKOFF = Schedule.exponential(Duration.millis(250)).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(5))),
  Schedule.upTo(Duration.minutes(10))
)

/**
 * Runs `write` again while the database is unavailable (see STORAGE_BACKOFF); any other failure
 * ends it at once. Interruptible even where its caller is not: a hub stopping does not wait out an outage.
 */
export const untilStored = <A, E, R>(write: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.sandbox(write).pipe(
    Effect.retry({ schedule: STORAGE_BACKOFF, while: (cause) => Option.isSome(unavailableOf(cause)) }),
    Effect.unsandbox,
    Effect.interruptible
  )

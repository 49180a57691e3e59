/**
 * The database failing (PostgreSQL restarting or unreachable, its connections terminated; a SQLite
 * file that cannot be written): an SqlError, whether a caller failed with it or died of it after
 * `orDie`. The edge answers it 503 storage_unavailable with Retry-After (Edge/Middleware.ts); a write
 * that must not be lost once its outcome is known (a send Meta accepted) is tried again until the
 * database takes it (`untilStored`).
 */
import { Cause, Duration, Effect, Option, Predicate, Schedule } from "effect"

/** An SqlError, or an error caused by one (a few levels down). */
const isStorageError = (u: unknown, depth = 0): boolean =>
  Predicate.isTagged(u, "SqlError") ||
  (depth < 3 && Predicate.hasProperty(u, "cause") && isStorageError(u.cause, depth + 1))

/** The database's error in `cause` (failed with or died of), if the database is what failed. */
export const storageFailureOf = (cause: Cause.Cause<unknown>): Option.Option<unknown> =>
  Cause.find(cause, (reason) => {
    const value = Cause.isFailType(reason) ? reason.error : Cause.isDieType(reason) ? reason.defect : undefined
    return isStorageError(value) ? Option.some(value) : Option.none()
  })

/**
 * Tries again after 250 ms, doubling to every 5 s, for up to 10 minutes: a restart or a failover
 * takes seconds to a minute; past that an operator is needed, and the failure is logged.
 */
const STORAGE_BACKOFF = Schedule.exponential(Duration.millis(250)).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(5))),
  Schedule.upTo(Duration.minutes(10))
)

/**
 * Runs `write` again while the database is what fails it (see STORAGE_BACKOFF); any other failure
 * ends it at once. Interruptible even where its caller is not: a hub stopping does not wait out an outage.
 */
export const untilStored = <A, E, R>(write: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.sandbox(write).pipe(
    Effect.retry({ schedule: STORAGE_BACKOFF, while: (cause) => Option.isSome(storageFailureOf(cause)) }),
    Effect.unsandbox,
    Effect.interruptible
  )

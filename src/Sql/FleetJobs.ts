/**
 * Periodic work that must run once for the fleet, not once per replica (retention, the
 * Idempotency-Key purge). Each job has a row in fleet_jobs saying when it is next due; every replica
 * looks each minute, and the one whose claim moves that time on first runs the job (the claim is one
 * conditional statement, so exactly one claim succeeds per period on either engine). A replica that
 * dies mid-run leaves the job to the next period, which is fine for housekeeping. A single process
 * claims every period itself: the same code on SQLite.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, type Scope } from "effect"
import { hostname } from "node:os"

/** How often replicas look whether a job is due; a job runs at most this late. */
const LOOK_EVERY = Duration.minutes(1)

const replica = `${hostname()}:${process.pid}`

/** Claims the job's current period for this replica: true when this call moved it on (run the job), false when it is not due or another replica did. */
export const claimFleetJob = (sql: SqlClient.SqlClient, name: string, every: Duration.Duration, nowMs: number) => {
  const now = new Date(nowMs).toISOString()
  const next = new Date(nowMs + Duration.toMillis(every)).toISOString()
  return sql<
    { readonly name: string }
  >`INSERT INTO fleet_jobs (name, next_run_at, run_by) VALUES (${name}, ${next}, ${replica})
    ON CONFLICT (name) DO UPDATE SET next_run_at = ${next}, run_by = ${replica} WHERE fleet_jobs.next_run_at <= ${now}
    RETURNING name`.pipe(Effect.map((rows) => rows.length > 0))
}

/**
 * Runs `job` once per `every` for the fleet, while the scope lasts: the first look after `firstAfter`,
 * then every minute. Failures are logged; the job runs again next period.
 */
export const runForFleet = <E>(
  name: string,
  options: { readonly every: Duration.Duration; readonly firstAfter: Duration.Duration },
  job: Effect.Effect<void, E>
): Effect.Effect<void, never, SqlClient.SqlClient | Scope.Scope> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const look = Effect.gen(function*() {
      if (yield* claimFleetJob(sql, name, options.every, Date.now())) yield* job
    }).pipe(
      Effect.catchAllCause((cause) => Effect.logError(`Periodic job ${name} failed; it runs again next period`, cause))
    )
    return Effect.sleep(options.firstAfter).pipe(
      Effect.zipRight(Effect.forever(Effect.zipRight(look, Effect.sleep(LOOK_EVERY)))),
      Effect.forkScoped,
      Effect.asVoid
    )
  })

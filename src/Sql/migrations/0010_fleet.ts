import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What a fleet of replicas on one database shares beyond the data itself:
 * - fleet_jobs: when each periodic job (retention, the Idempotency-Key purge) is next due, so that
 *   the one replica that claims it first runs it (Sql/FleetJobs.ts). A single process claims it as well.
 * - send_pacing (PostgreSQL only; SQLite serves one process, which paces in memory): each phone
 *   number's send budget as a theoretical arrival time in epoch milliseconds (GCRA), from which
 *   replicas take slices of HUB_SEND_RATE (Messages/Pacing.ts).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE fleet_jobs (
    name TEXT PRIMARY KEY,
    next_run_at TEXT NOT NULL,
    run_by TEXT NOT NULL
  )`
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`CREATE TABLE send_pacing (
        phone_number_id TEXT PRIMARY KEY,
        tat_ms BIGINT NOT NULL,
        last_grant INTEGER NOT NULL
      )`,
    orElse: () => Effect.void
  })
})

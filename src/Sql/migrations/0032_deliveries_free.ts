import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The lease reads free rows only (issue 34). deliveries_due held every queued row, leased or not:
 * each lease read walked past the rows in flight at its front (a heap fetch each to learn they were
 * leased), and under load PostgreSQL's custom plans read the whole backlog as a bitmap and sorted it
 * (17,000–32,000 rows for 1,024, 17–37 ms a read; 80 µs of PostgreSQL's time per delivery in overload).
 * - deliveries_due now holds the queued rows no one leases, in due order. A lease takes a row out
 *   of it (the lease's update names lease_owner, so it is never HOT: it was HOT for only 38 % of
 *   leases anyway, pages being full); a released lease or a retry puts it back.
 * - deliveries_leased: the queued rows in flight, by when their lease expires; the lease reads the
 *   expired ones from it (a replica that stopped without releasing), one short range read that finds
 *   none in the usual case. A finished or cancelled row (no next attempt) leaves it.
 * deliveries_webhook_due still holds every queued row: the delivery log and a webhook's queued
 * counts show rows in flight too.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX deliveries_due`
  yield* sql`CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at)
    WHERE next_attempt_at IS NOT NULL AND lease_owner IS NULL`
  yield* sql`CREATE INDEX deliveries_leased ON deliveries (lease_expires_at)
    WHERE next_attempt_at IS NOT NULL AND lease_owner IS NOT NULL`
})

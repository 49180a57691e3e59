import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * PostgreSQL: room on each page of `deliveries` for its rows' next versions (issue 34).
 * - fillfactor 70: an insert leaves 30 % of a page free, so the lease's update (`lease_owner`,
 *   `lease_expires_at`, which no index holds) writes the new version on the same page and touches no
 *   index (a HOT update): with pages filled to 100 % no lease was HOT, each wrote an entry in every
 *   index. Pages already written keep their fill until rewritten; new rows go to new pages.
 * - autovacuum at 2 % of the rows changed, not 20 %: every delivery ends with an update of indexed
 *   columns (status, next_attempt_at), whose old entries stay in the due indexes the lease reads
 *   (deliveries_due, deliveries_webhook_due: one heap fetch each to learn the row is gone) until a
 *   vacuum removes them and marks the pages all-visible (the queued webhooks' list is then read from
 *   the index alone); and inserts, most of this table's writes, start a vacuum at the same share.
 * SQLite has neither setting; its rows are rewritten in place. (deliveries_lane already holds only
 * per-person rows: migration 0025 made it partial.)
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql`ALTER TABLE deliveries SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02,
        autovacuum_vacuum_insert_scale_factor = 0.02)`,
    orElse: () => Effect.void
  })
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Early statuses found by their time: retention deletes those older than HUB_RETENTION, in batches
 * (Delivery/Retention.ts). Without this index each hourly pass read the whole table, and the table
 * can be large: a status whose message no send of this hub made (one sent by another tool on the same
 * number) stays here until retention, so a hub that fans out events for messages sent elsewhere keeps
 * a month of every status. Figures: docs/PERFORMANCE.md, "Retention of events".
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX message_status_backlog_at ON message_status_backlog (status_at)`
})

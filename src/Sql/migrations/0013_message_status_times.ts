import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * When a message reached each step (sent, delivered, read, failed), for its status timeline
 * (`statusTimes` of GET /api/messages). Written by the status moves that already rewrite the row,
 * so no statement is added on the status path. Records from before keep only `status_at`, the time
 * of their current status.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE messages ADD COLUMN sent_at TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN delivered_at TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN read_at TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN failed_at TEXT`
})

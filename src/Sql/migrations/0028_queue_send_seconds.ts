import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The queued sends each number made, by second, for the queues' measured pace (GET /api/send-queues
 * `sends_per_second`, the live stream's `queue` events) across every replica: a row per send made, pruned
 * after a minute by the drainer. Rows are only ever added, never updated: a count per number and second
 * kept by upserts deadlocked the replicas' group commits on PostgreSQL (test/send-queue-fleet.test.ts),
 * each transaction updating the same few rows in its own order.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE queue_send_seconds (
    phone_number_id TEXT NOT NULL,
    second BIGINT NOT NULL
  )`
  yield* sql`CREATE INDEX queue_send_seconds_second ON queue_send_seconds (second, phone_number_id)`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The drainer's rounds read only what is due (scripts/bench.ts --scenarios queue): the numbers with
 * sends due, the soonest due time and the expired sends were found through the index on `state` alone,
 * every row of the queue read each round (7–9 ms each with 20,000 queued, growing with the depth).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX send_queue_state_due ON send_queue (state, due_at, phone_number_id)`
  yield* sql`CREATE INDEX send_queue_state_expires ON send_queue (state, expires_at)`
})

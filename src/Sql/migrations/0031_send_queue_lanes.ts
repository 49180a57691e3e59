import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The drainer's lease reads one number's lane (transactional or bulk) in due order, through an index
 * that ends in `due_at, seq`: the one it had ended in `seq`, so SQLite's planner preferred the index on
 * (state, expires_at) and read every queued send of every number, then sorted (300 µs a lease with
 * 1,000 queued, growing with the depth: the full-size drain fell to about 35 sends/s). Now a lease
 * reads the rows it takes (7 µs a row, whatever the depth), and the numbers with sends due are found
 * one index seek per number and lane (scripts/bench.ts --scenarios queue; docs/PERFORMANCE.md).
 *
 * The indexes the drainer reads queued sends by hold only queued sends, and the one it reads leases
 * by only leased and sending ones: a send's lease, its claim and its removal each touched every index
 * that names `state` (four), three of them now. Their queries name the same condition, which is how
 * both engines know they may use them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX send_queue_number_due`
  yield* sql`DROP INDEX send_queue_state_due`
  yield* sql`DROP INDEX send_queue_state_expires`
  yield* sql`DROP INDEX send_queue_lease`
  yield* sql`CREATE INDEX send_queue_number_due ON send_queue (phone_number_id, priority, due_at, seq)
    WHERE state = 'queued'`
  yield* sql`CREATE INDEX send_queue_due ON send_queue (due_at) WHERE state = 'queued'`
  yield* sql`CREATE INDEX send_queue_expires ON send_queue (expires_at) WHERE state = 'queued'`
  yield* sql`CREATE INDEX send_queue_lease ON send_queue (lease_until) WHERE state <> 'queued'`
})

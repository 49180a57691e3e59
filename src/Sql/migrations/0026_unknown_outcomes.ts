import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The queued sends that ended `outcome_unknown` and have no upstream id, by instance and age: a status
 * for an id no record holds looks here for the send it may be of (Messages/EarlyStatuses.ts), without
 * reading the instance's other records. Partial, so it holds only those few.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX messages_unknown_outcome ON messages (instance_id, created_at, id)
    WHERE failure_reason = 'outcome_unknown' AND wa_message_id IS NULL`
})

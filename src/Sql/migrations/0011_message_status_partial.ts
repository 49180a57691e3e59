import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The status indexes (migration 0008) leave out `pending` records, like the upstream id index
 * (migration 0004): a send writes its record pending and then accepted, so a full index paid an entry
 * for the pending record only for the acceptance to move it. Sends went from about 146 to 118 µs of
 * CPU each (docs/PERFORMANCE.md). A query uses these indexes only when it repeats their condition,
 * which the list does (Messages/ListQueries.ts); `status=pending` is served like `direction`, by a
 * bounded window of the newest-first index.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`DROP INDEX messages_instance_status`
  yield* sql`DROP INDEX messages_organization_status`
  yield* sql`CREATE INDEX messages_instance_status ON messages (instance_id, status, created_at, id) WHERE status <> 'pending'`
  yield* sql`CREATE INDEX messages_organization_status ON messages (organization_id, status, created_at, id) WHERE status <> 'pending'`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * PostgreSQL: no index on deliveries.message_id (issue 34: indexes that carry only what the hot
 * queries need). No query reads a delivery by its webhook-id, yet the UNIQUE constraint's index took
 * an entry for each of a delivery's three row versions (insert, lease, outcome), about a fifth of
 * its index writes. The id stays unique by how it is made: a fresh UUIDv7 (`newId("msg")`) for
 * every delivery, a replay's included (Replays.ts), never copied from another row.
 * SQLite keeps its constraint: a column's UNIQUE cannot be dropped there without rebuilding the
 * table, and its index writes are calls within the process, not the cost this issue is about.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () => sql`ALTER TABLE deliveries DROP CONSTRAINT deliveries_message_id_key`,
    orElse: () => Effect.void
  })
})

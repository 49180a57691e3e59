import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The message history filtered by status walks its own index range newest first, per instance or per
 * organization, instead of walking every record of the scope and skipping the other statuses: at ten
 * million records a rare status (failed, pending) would otherwise read them all. Each status change
 * moves a record's entry in both indexes: the cost on the send and status paths is in
 * docs/PERFORMANCE.md.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX messages_instance_status ON messages (instance_id, status, created_at, id)`
  yield* sql`CREATE INDEX messages_organization_status ON messages (organization_id, status, created_at, id)`
})

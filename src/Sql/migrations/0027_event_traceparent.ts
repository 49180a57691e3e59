import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * An event keeps the W3C traceparent of the upstream post that brought it (NULL when tracing is off),
 * so each attempt to deliver it, on whichever replica and however late, joins that post's trace
 * (Tracing/Spans.ts, Delivery/Attempt.ts). A nullable column without a default: no rewrite of the table.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ADD COLUMN traceparent TEXT`
})

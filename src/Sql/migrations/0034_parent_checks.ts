import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type ParentReference, perStatementChecks, REFERENCE_FIXED } from "../ParentChecks.js"

/**
 * The references written on every delivery, in statements of hundreds of rows in overload. The
 * messages' (instance, organization) keep their built-in keys: with them checked per statement too,
 * the send's PostgreSQL CPU did not move beyond this machine's noise (173–201 µs a send with and
 * without them and on main, `scripts/bench.ts --db postgres --scenarios send,events`), so the change
 * was not worth its risk there.
 */
export const DELIVERY_PATH_REFERENCES: ReadonlyArray<ParentReference> = [
  { child: "deliveries", column: "webhook_id", parent: "webhooks" },
  { child: "deliveries", column: "event_id", parent: "events" },
  { child: "delivery_attempts", column: "delivery_id", parent: "deliveries" },
  { child: "events", column: "instance_id", parent: "instances" }
]

/**
 * PostgreSQL: the foreign keys on the deliveries' path checked once per statement, not once per row
 * (see Sql/ParentChecks.ts for the guarantees kept and the measurement). SQLite keeps its built-in
 * foreign keys.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.forEach(
        [REFERENCE_FIXED, ...DELIVERY_PATH_REFERENCES.flatMap(perStatementChecks)],
        (statement) => sql.unsafe(statement),
        { discard: true }
      ),
    orElse: () => Effect.void
  })
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { HOT_REFERENCES, perStatementChecks, REFERENCE_FIXED } from "../ParentChecks.js"

/**
 * PostgreSQL: the foreign keys written on every delivery and every send checked once per statement,
 * not once per row (see Sql/ParentChecks.ts for the guarantees kept and the measurement). SQLite
 * keeps its built-in foreign keys.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.forEach(
        [REFERENCE_FIXED, ...HOT_REFERENCES.flatMap(perStatementChecks)],
        (statement) => sql.unsafe(statement),
        { discard: true }
      ),
    orElse: () => Effect.void
  })
})

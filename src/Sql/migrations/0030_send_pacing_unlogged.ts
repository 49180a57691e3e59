import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * send_pacing (PostgreSQL only) unlogged: each ask of a number's budget (Messages/SharedPacing.ts) was a
 * commit of its own waiting for the WAL's flush, 0.2 a send in the benchmark, more flushes than the
 * sends' own group commits. The budget is a second's worth of state: a crash of PostgreSQL (not a
 * clean restart) empties the table, and every number's budget then starts full, as after a pause.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () => sql`ALTER TABLE send_pacing SET UNLOGGED`,
    orElse: () => Effect.void
  })
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Why a change was kept aside instead of delivered: NULL for a phone number no instance is bound to
 * (as before), `stale` for a replay: a post whose changes are all older than the dedupe horizon
 * (HUB_RETENTION), whose keys are pruned, so it could not be told from a new one.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE unrouted_events ADD COLUMN reason TEXT`
})

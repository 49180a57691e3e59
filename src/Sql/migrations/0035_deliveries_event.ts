import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Deliveries found by their event: what deleting an event checks (no delivery may still name it).
 * Without this index that check read every delivery kept: on SQLite once per event deleted (its
 * built-in foreign key), on PostgreSQL once per statement (migration 0034), comparing each delivery
 * with the 500 events of the batch. Retention's batch of 500 events with a million deliveries kept
 * took 50–52 s on SQLite, holding its one writer (every post waited), and 10–12 s on PostgreSQL;
 * with the index 1.5 ms and 11–25 ms (scripts/bench/retention.ts). On PostgreSQL it costs an
 * entry per row version written (ids are time-ordered: entries go to the index's right edge), within
 * the noise of the deliveries' floor (scripts/bench/pg-floor.ts). docs/PERFORMANCE.md, "Retention of
 * events". Building it holds writes to deliveries while it runs: about half a second per million
 * deliveries on either engine (the same script).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX deliveries_event ON deliveries (event_id)`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * What a fleet of replicas on one database shares beyond the data itself:
 * - fleet_jobs: when each periodic job (retention, the Idempotency-Key purge) is next due, so that
 *   the one replica that claims it first runs it (Sql/FleetJobs.ts). A single process claims it as well.
 * - send_pacing (PostgreSQL only; SQLite serves one process, which paces in memory): each phone
 *   number's send budget as a theoretical arrival time in epoch milliseconds (GCRA), from which
 *   replicas take slices of HUB_SEND_RATE (Messages/Pacing.ts).
 * - message_counts on PostgreSQL: rows of counts added up, no longer one row per instance. One row
 *   per instance, bumped by every insert, was a lock each replica's batch held until its commit:
 *   replicas writing messages of the same instances queued on it, and, locking them in different
 *   orders, deadlocked (a 1 s stall each, PostgreSQL's deadlock_timeout). Each insert statement now
 *   adds one row per instance it wrote (a statement trigger), the list's total already sums them,
 *   and a periodic job folds them back to one row per instance (compactMessageCounts).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE fleet_jobs (
    name TEXT PRIMARY KEY,
    next_run_at TEXT NOT NULL,
    run_by TEXT NOT NULL
  )`
  yield* sql.onDialectOrElse({
    pg: () =>
      Effect.all([
        sql`CREATE TABLE send_pacing (
          phone_number_id TEXT PRIMARY KEY,
          tat_ms BIGINT NOT NULL,
          last_grant INTEGER NOT NULL
        )`,
        sql`ALTER TABLE message_counts DROP CONSTRAINT message_counts_pkey`,
        sql`CREATE INDEX message_counts_instance ON message_counts (instance_id)`,
        sql`DROP TRIGGER messages_count ON messages`,
        sql.unsafe(`CREATE OR REPLACE FUNCTION messages_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
          INSERT INTO message_counts (instance_id, organization_id, total)
            SELECT instance_id, organization_id, COUNT(*) FROM inserted GROUP BY instance_id, organization_id;
          RETURN NULL;
        END $$`),
        sql.unsafe(`CREATE TRIGGER messages_count AFTER INSERT ON messages REFERENCING NEW TABLE AS inserted
          FOR EACH STATEMENT EXECUTE FUNCTION messages_count()`)
      ], { discard: true }),
    orElse: () => Effect.void
  })
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Calls the upstream's `calls` webhooks told of, per instance: enough to find the call a pre-accept
 * without `call_id` means (the newest incoming call from that number still ringing). `state_rank`
 * orders the states (ringing 0, connected or accepted 1, rejected or ended 2) so a late event never
 * moves a call back. Rows are kept a day after their last event (Calls/Repo.ts prunes them as new events arrive).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE calls (
    instance_id TEXT NOT NULL REFERENCES instances (id),
    call_id TEXT NOT NULL,
    user_number TEXT,
    direction TEXT,
    state TEXT NOT NULL CHECK (state IN ('ringing', 'connected', 'accepted', 'rejected', 'ended')),
    state_rank INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (instance_id, call_id)
  )`
  yield* sql`CREATE INDEX calls_instance_user_started ON calls (instance_id, user_number, started_at)`
  yield* sql`CREATE INDEX calls_updated ON calls (updated_at)`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Queued sends (issue 32): `POST /api/messages` with `Prefer: respond-async` or `send_at`.
 * - `messages` gains the queue's words for a record: `failure_reason` (expired, cancelled, refused,
 *   outcome_unknown), `send_at`, `expires_at` and `priority`; NULL for synchronous sends.
 * - `send_queue`: one row per queued send until it is made or given up (the record keeps the outcome).
 *   `seq` is the order sends were accepted in (per person, sends go out in that order); times are epoch
 *   milliseconds, compared with the replica's clock. `state` is `queued`, `leased` (a replica holds it
 *   and waits for its slot: given back when the lease runs out) or `sending` (the Graph call began: if
 *   the lease runs out then, the send may have reached Meta and is never made again).
 * - `send_pairs`: each number and person's theoretical arrival time under Meta's pair rate (GCRA: one
 *   message every 6 s, bursts of 45 borrowed from later; 131056 beyond).
 * - `number_throughput`: each number's throughput level as the Graph last said, and when it was asked.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE messages ADD COLUMN failure_reason TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN send_at TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN expires_at TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN priority TEXT`
  const seq = sql.onDialectOrElse({
    pg: () => sql.literal("seq BIGSERIAL PRIMARY KEY"),
    orElse: () => sql.literal("seq INTEGER PRIMARY KEY")
  })
  yield* sql`CREATE TABLE send_queue (
    ${seq},
    message_id TEXT NOT NULL UNIQUE,
    organization_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    waba_id TEXT NOT NULL,
    phone_number_id TEXT NOT NULL,
    party TEXT NOT NULL,
    priority INTEGER NOT NULL,
    body TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    send_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    due_at BIGINT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'leased', 'sending')),
    lease_owner TEXT,
    lease_until BIGINT,
    last_error TEXT
  )`
  yield* sql`CREATE INDEX send_queue_number_due ON send_queue (phone_number_id, state, priority, seq)`
  yield* sql`CREATE INDEX send_queue_pair ON send_queue (phone_number_id, party, seq)`
  yield* sql`CREATE INDEX send_queue_lease ON send_queue (state, lease_until)`
  yield* sql`CREATE TABLE send_pairs (
    phone_number_id TEXT NOT NULL,
    party TEXT NOT NULL,
    tat BIGINT NOT NULL,
    PRIMARY KEY (phone_number_id, party)
  )`
  yield* sql`CREATE TABLE number_throughput (
    phone_number_id TEXT PRIMARY KEY,
    level TEXT NOT NULL,
    checked_at BIGINT NOT NULL
  )`
})

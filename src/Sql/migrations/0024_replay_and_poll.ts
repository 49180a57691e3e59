import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Replay and pull (issue 33):
 * - webhooks.kind: `push` (deliveries are POSTed to its url) or `poll` (no url: its events wait in
 *   the hub and GET /api/webhooks/{id}/poll reads them from the events table);
 * - events by instance and arrival: a replay walks an instance's events of a window, and a poll
 *   reads them after its cursor, in (received_at, id) order;
 * - webhook_replays: each replay call (its window, filter, where it stopped) for its progress;
 *   webhook_replay_keys: its Idempotency-Keys (Sql/IdempotencyKeys.ts);
 * - deliveries.replay_id: the replay that queued (or queued again) a delivery. The indexes on it are
 *   partial (replay_id IS NOT NULL): a live delivery, written with none, adds no entry to them, so
 *   the ingress's hot write pays nothing for them. A replay finds an event's earlier delivery to the
 *   webhook through deliveries_webhook (a live delivery is created at its event's received_at) or,
 *   for one a replay made, through deliveries_replayed_event.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhooks ADD COLUMN kind TEXT NOT NULL DEFAULT 'push'`
  yield* sql`CREATE INDEX events_instance_received ON events (instance_id, received_at, id)`
  yield* sql`ALTER TABLE deliveries ADD COLUMN replay_id TEXT`
  yield* sql`CREATE INDEX deliveries_replay ON deliveries (replay_id, status) WHERE replay_id IS NOT NULL`
  yield* sql`CREATE INDEX deliveries_replayed_event ON deliveries (webhook_id, event_id) WHERE replay_id IS NOT NULL`
  yield* sql`CREATE TABLE webhook_replays (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id),
    since TEXT NOT NULL,
    until TEXT NOT NULL,
    events TEXT,
    events_queued INTEGER NOT NULL,
    already_queued INTEGER NOT NULL,
    next_cursor TEXT,
    finished_at TEXT,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX webhook_replays_created ON webhook_replays (created_at)`
  yield* sql`CREATE TABLE webhook_replay_keys (
    webhook_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    replay_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (webhook_id, idempotency_key)
  )`
})

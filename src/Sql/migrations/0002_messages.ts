import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Message records (outbound sends and inbound messages) and the Idempotency-Key answers of sends.
 * Timestamps are ISO 8601 text (they sort as time). Indexes serve the list endpoint (newest first per
 * instance or organization; other filters walk that order) and status updates by upstream message id.
 * Every index is paid on each send and status change, so there are no more than these three.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    instance_id TEXT NOT NULL REFERENCES instances (id),
    direction TEXT NOT NULL CHECK (direction IN ('outbound', 'inbound')),
    wa_message_id TEXT,
    to_number TEXT,
    from_number TEXT,
    type TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'delivered', 'read', 'failed')),
    error TEXT,
    status_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  )`
  // NULLs are distinct in unique indexes (SQLite and Postgres), so unaccepted sends do not collide.
  yield* sql`CREATE UNIQUE INDEX messages_instance_wa_message ON messages (instance_id, wa_message_id)`
  yield* sql`CREATE INDEX messages_instance_created ON messages (instance_id, created_at DESC, id DESC)`
  yield* sql`CREATE INDEX messages_organization_created ON messages (organization_id, created_at DESC, id DESC)`

  yield* sql`CREATE TABLE idempotency_keys (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    idempotency_key TEXT NOT NULL,
    instance_id TEXT NOT NULL REFERENCES instances (id),
    request_hash TEXT NOT NULL,
    status_code INTEGER,
    response TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (organization_id, idempotency_key)
  )`
  yield* sql`CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`
})

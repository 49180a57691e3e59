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

  // Each instance's record count, kept by the database itself on every insert, so the list's total
  // is one row read, not a count of every record (records are never deleted). Triggers have no
  // portable syntax: SQLite's is here, Postgres needs a trigger function.
  yield* sql`CREATE TABLE message_counts (
    instance_id TEXT PRIMARY KEY REFERENCES instances (id),
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    total INTEGER NOT NULL
  )`
  yield* sql`CREATE INDEX message_counts_organization ON message_counts (organization_id)`
  const countInsert =
    "INSERT INTO message_counts (instance_id, organization_id, total) VALUES (NEW.instance_id, NEW.organization_id, 1) " +
    "ON CONFLICT (instance_id) DO UPDATE SET total = message_counts.total + 1"
  yield* sql.onDialectOrElse({
    sqlite: () => sql.unsafe(`CREATE TRIGGER messages_count AFTER INSERT ON messages BEGIN ${countInsert}; END`),
    pg: () =>
      Effect.zipRight(
        sql.unsafe(
          `CREATE FUNCTION messages_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${countInsert}; RETURN NULL; END $$`
        ),
        sql.unsafe(
          "CREATE TRIGGER messages_count AFTER INSERT ON messages FOR EACH ROW EXECUTE FUNCTION messages_count()"
        )
      ),
    orElse: () => Effect.dieMessage("messages_count: no trigger written for this database")
  })

  // Status events that arrive before the send that caused them has recorded its upstream id (the
  // upstream can be that fast); the acceptance applies the best of them.
  yield* sql`CREATE TABLE message_status_backlog (
    instance_id TEXT NOT NULL REFERENCES instances (id),
    wa_message_id TEXT NOT NULL,
    status TEXT NOT NULL,
    status_rank INTEGER NOT NULL,
    status_at TEXT NOT NULL,
    error TEXT,
    PRIMARY KEY (instance_id, wa_message_id, status)
  )`

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

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Idempotency-Keys are scoped per instance, not per organization: one instance's key can no longer
 * block another instance's send with a 409. The table is rebuilt with the new key; its rows (at most
 * a day old) are carried over.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE idempotency_keys_by_instance (
    instance_id TEXT NOT NULL REFERENCES instances (id),
    idempotency_key TEXT NOT NULL,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    request_hash TEXT NOT NULL,
    status_code INTEGER,
    response TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (instance_id, idempotency_key)
  )`
  yield* sql`INSERT INTO idempotency_keys_by_instance (instance_id, idempotency_key, organization_id, request_hash, status_code, response, created_at)
    SELECT instance_id, idempotency_key, organization_id, request_hash, status_code, response, created_at FROM idempotency_keys`
  yield* sql`DROP TABLE idempotency_keys`
  yield* sql`ALTER TABLE idempotency_keys_by_instance RENAME TO idempotency_keys`
  yield* sql`CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`
})

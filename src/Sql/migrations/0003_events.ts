import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Events: webhooks, the upstream changes the hub accepted (deduplicated), the envelope each instance
 * receives, the outbox of deliveries with their leases, and the attempt log.
 * Booleans are INTEGER 0/1 and timestamps ISO 8601 text, so the SQL stays portable to Postgres.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE webhooks (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    instance_id TEXT NOT NULL REFERENCES instances (id),
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    secret_encrypted TEXT NOT NULL,
    previous_secret_encrypted TEXT,
    previous_secret_expires_at TEXT,
    active INTEGER NOT NULL,
    disabled_reason TEXT,
    failing_since TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
  )`
  yield* sql`CREATE INDEX webhooks_instance ON webhooks (instance_id, active)`
  yield* sql`CREATE INDEX webhooks_organization ON webhooks (organization_id, created_at)`

  // What one instance receives for one upstream POST: the envelope holding only its new changes.
  yield* sql`CREATE TABLE events (
    id TEXT PRIMARY KEY,
    instance_id TEXT NOT NULL REFERENCES instances (id),
    body TEXT NOT NULL,
    change_count INTEGER NOT NULL,
    received_at TEXT NOT NULL
  )`
  // One row per accepted change: its key makes a change the upstream sends twice count once.
  yield* sql`CREATE TABLE event_changes (
    dedupe_key TEXT PRIMARY KEY,
    event_id TEXT NOT NULL,
    received_at TEXT NOT NULL
  )`
  // Retention deletes an event's dedupe keys with it.
  yield* sql`CREATE INDEX event_changes_event ON event_changes (event_id)`
  yield* sql`CREATE TABLE unrouted_events (
    id TEXT PRIMARY KEY,
    phone_number_id TEXT,
    waba_id TEXT,
    field TEXT,
    change_json TEXT NOT NULL,
    received_at TEXT NOT NULL
  )`

  // status: pending (first attempt due), failed (a retry is scheduled), succeeded, dead, cancelled.
  yield* sql`CREATE TABLE deliveries (
    id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL REFERENCES webhooks (id),
    event_id TEXT NOT NULL REFERENCES events (id),
    message_id TEXT NOT NULL UNIQUE,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    final_attempt INTEGER,
    next_attempt_at TEXT,
    lease_owner TEXT,
    lease_expires_at TEXT,
    last_status_code INTEGER,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
  )`
  // Only queued rows (pending or failed) have a next attempt: finished rows leave this index, so it
  // stays small and each commit touches few of its pages. Leasing reads ranges of it.
  yield* sql`CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at) WHERE next_attempt_at IS NOT NULL`
  yield* sql`CREATE INDEX deliveries_webhook ON deliveries (webhook_id, created_at)`
  yield* sql`CREATE TABLE delivery_attempts (
    id TEXT PRIMARY KEY,
    delivery_id TEXT NOT NULL REFERENCES deliveries (id),
    attempt INTEGER NOT NULL,
    started_at TEXT NOT NULL,
    status_code INTEGER,
    latency_ms INTEGER NOT NULL,
    error TEXT,
    response_snippet TEXT
  )`
  yield* sql`CREATE INDEX delivery_attempts_delivery ON delivery_attempts (delivery_id, attempt)`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Organizations, their instances, api tokens and operator sessions. Timestamps are ISO 8601 text. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE TABLE instances (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    name TEXT NOT NULL,
    phone_number_id TEXT NOT NULL UNIQUE,
    waba_id TEXT NOT NULL,
    access_token_encrypted TEXT,
    created_at TEXT NOT NULL
  )`
  yield* sql`CREATE INDEX instances_organization ON instances (organization_id, created_at)`
  yield* sql`CREATE INDEX instances_waba ON instances (waba_id)`
  yield* sql`CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    instance_id TEXT REFERENCES instances (id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    token_hint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
  )`
  yield* sql`CREATE INDEX api_tokens_organization ON api_tokens (organization_id, created_at)`
  yield* sql`CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    token_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT
  )`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Broadcasts (issue 32): one template to many recipients, each a bulk queued send.
 * - `broadcasts`: the template as given (JSON), the window its sends take, and when it was cancelled.
 * - `broadcast_recipients`: one row per person (the same person twice in a broadcast is one row), with the
 *   message record of their send, or why none was made (`skipped_reason`: `opted_out`). `seq` orders them
 *   as added (the listing's cursor).
 * - `marketing_opt_outs`: the people who stopped a business account's marketing messages (a `user_preferences`
 *   webhook with `stop`, or Meta's 131050), until they resume.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE broadcasts (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    name TEXT NOT NULL,
    template TEXT NOT NULL,
    send_at TEXT,
    validity INTEGER,
    created_at TEXT NOT NULL,
    cancelled_at TEXT
  )`
  yield* sql`CREATE INDEX broadcasts_organization_created ON broadcasts (organization_id, created_at DESC, id DESC)`
  yield* sql`CREATE TABLE broadcast_recipients (
    broadcast_id TEXT NOT NULL,
    party TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT,
    skipped_reason TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (broadcast_id, party)
  )`
  yield* sql`CREATE UNIQUE INDEX broadcast_recipients_seq ON broadcast_recipients (broadcast_id, seq)`
  yield* sql`CREATE TABLE marketing_opt_outs (
    waba_id TEXT NOT NULL,
    party TEXT NOT NULL,
    opted_out_at TEXT NOT NULL,
    PRIMARY KEY (waba_id, party)
  )`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Test events' bounds in the database, so they hold for a fleet (Webhooks/TestEvents.ts): when each
 * webhook was last tested (one test a second), and each Idempotency-Key of a test with its delivery
 * for 10 minutes (a repeat answers that delivery instead of sending another).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhooks ADD COLUMN last_test_at TEXT`
  yield* sql`CREATE TABLE webhook_tests (
    webhook_id TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (webhook_id, idempotency_key)
  )`
})

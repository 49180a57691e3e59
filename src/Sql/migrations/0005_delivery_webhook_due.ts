import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Each webhook's queued deliveries by status and due time. The dispatcher leases the oldest due rows
 * overall through deliveries_due; when a webhook with all its share in flight holds the front of
 * that order (a slow receiver with a long queue), it finds the other webhooks' rows here instead of
 * reading past that queue on every round: the webhooks with queued rows with one seek each, and each
 * one's first due rows with one range read (Lease.ts). Like deliveries_due, it holds only
 * queued rows, so it stays small.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX deliveries_webhook_due ON deliveries (webhook_id, status, next_attempt_at) WHERE next_attempt_at IS NOT NULL`
})

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Webhook operations (issue 23):
 * - a webhook's event filter (`events`: NULL for every kind, else a JSON array of kinds) and its
 *   custom headers (`headers`: JSON of every header, secret ones with a null value;
 *   `headers_encrypted`: the secret ones, encrypted);
 * - `disabled_reason` becomes a code: gone_410, failing_too_long or manual;
 * - a delivery of a filtered webhook that takes only some of its event's changes carries its own
 *   body (`deliveries.body`, NULL for everyone else: the lease reads COALESCE(d.body, e.body));
 * - deliveries per webhook, outcome and hour, counted by the dispatcher's rounds (the health of
 *   GET /api/webhooks), with the time of the last one;
 * - the delivery log filtered by a failure status walks its own index range: these statuses are
 *   rare, so a partial index holds only them and the success path never touches it;
 * - a pending row is due from its creation (next_attempt_at = created_at, which the list of pending
 *   rows relies on): rows a replay made due later are set so.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhooks ADD COLUMN events TEXT`
  yield* sql`ALTER TABLE webhooks ADD COLUMN headers TEXT`
  yield* sql`ALTER TABLE webhooks ADD COLUMN headers_encrypted TEXT`
  yield* sql`UPDATE webhooks SET disabled_reason = CASE
      WHEN disabled_reason = 'the receiver answered 410 Gone' THEN 'gone_410'
      WHEN disabled_reason LIKE 'no successful delivery since %' THEN 'failing_too_long'
      ELSE 'manual' END
    WHERE disabled_reason IS NOT NULL`
  yield* sql`ALTER TABLE deliveries ADD COLUMN body TEXT`
  yield* sql`CREATE TABLE webhook_delivery_hours (
    webhook_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    hour TEXT NOT NULL,
    deliveries INTEGER NOT NULL,
    last_at TEXT NOT NULL,
    PRIMARY KEY (webhook_id, outcome, hour)
  )`
  yield* sql`CREATE INDEX deliveries_webhook_failures ON deliveries (webhook_id, status, created_at, id)
    WHERE status IN ('failed', 'dead', 'cancelled')`
  yield* sql`UPDATE deliveries SET next_attempt_at = created_at
    WHERE status = 'pending' AND next_attempt_at IS NOT NULL AND next_attempt_at <> created_at`
})

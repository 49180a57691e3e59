import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Per-person order (issue 33): a webhook with `ordering = 'per_contact'` receives one person's
 * deliveries one at a time, in the order the hub received them (Delivery/Lanes.ts).
 * - `deliveries.contact_key` is the person a delivery of such a webhook concerns (BSUID, else
 *   number): its lane. NULL for every other delivery, and once a delivery leaves its lane (replayed
 *   after it ended, ordering turned off). `contact_seq` is its place in the lane.
 * - A lane's first unfinished delivery is due as usual; the ones behind it are held: pending with
 *   no `next_attempt_at`, so they stay out of the due indexes the lease reads (deliveries_due,
 *   deliveries_webhook_due) and cost it nothing. When the first ends, the next is made due.
 * - `deliveries_lane` finds a lane's unfinished deliveries in order; it holds only those.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE webhooks ADD COLUMN ordering TEXT NOT NULL DEFAULT 'none'`
  yield* sql`ALTER TABLE deliveries ADD COLUMN contact_key TEXT`
  yield* sql`ALTER TABLE deliveries ADD COLUMN contact_seq BIGINT`
  yield* sql`CREATE INDEX deliveries_lane ON deliveries (webhook_id, contact_key, contact_seq)
    WHERE contact_key IS NOT NULL AND status IN ('pending', 'failed')`
})

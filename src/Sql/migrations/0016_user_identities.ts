import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Meta's 2026 identities and send routes on message records (issue 30). Every column is nullable and
 * added without a default, so the change is instant on both engines and a record written before it
 * reads as before.
 * - `user_id`, `parent_user_id`, `username`: the other party's business-scoped user id (BSUID), its
 *   parent id across linked portfolios, and its username, each when known. `to_number` keeps the
 *   number, or the BSUID when no number is known.
 * - `category`: the send's `category` (Direct Send: `utility`, `authentication`) when given.
 * - `endpoint`: the Graph endpoint that carried an outbound send (`messages` or `marketing_messages`).
 * - `origin`: where a record came from when not a send or an inbound message of this hub:
 *   `smb_message_echoes` (sent from the WhatsApp Business app) or `history` (synchronised at onboarding).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE messages ADD COLUMN user_id TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN parent_user_id TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN username TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN category TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN endpoint TEXT`
  yield* sql`ALTER TABLE messages ADD COLUMN origin TEXT`
})

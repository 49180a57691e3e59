import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Who is who (issue 30): a WhatsApp user is known to an organization by a number, a business-scoped
 * user id (BSUID), a parent BSUID, or several of these over time (a number change gives a new BSUID).
 * - `user_identities`: every identifier the hub has seen paired with another, grouped by `person_id`
 *   (Messages/Identities.ts keeps the groups merged as pairs arrive).
 * - `messages_party`: the other party of a record (the number, or the BSUID when none is known) per
 *   organization, newest first, so `GET /api/messages?user=` reads a person's records by index
 *   whatever the size of the history.
 * - `calls.user_id`: the BSUID of the user on a call, so a pre-accept finds the ringing call by either
 *   identifier.
 * Each is new (a table, an index, a nullable column): a record written before reads as before.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE user_identities (
    organization_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    person_id TEXT NOT NULL,
    learned_at TEXT NOT NULL,
    PRIMARY KEY (organization_id, identifier)
  )`
  yield* sql`CREATE INDEX user_identities_person ON user_identities (organization_id, person_id)`
  yield* sql`CREATE INDEX messages_party ON messages (organization_id, (COALESCE(to_number, from_number)), created_at, id)`
  yield* sql`ALTER TABLE calls ADD COLUMN user_id TEXT`
  yield* sql`CREATE INDEX calls_instance_user_id_started ON calls (instance_id, user_id, started_at)`
})

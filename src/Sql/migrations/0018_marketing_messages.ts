import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The Marketing Messages API (issue 30): MARKETING templates may go to `/{phone-number-id}/marketing_messages`.
 * - `instances.marketing_messages`: `auto` (route by the template's category) or `off` (every send to
 *   `/messages`, as before); a constant default, so the column is added instantly on both engines.
 * - `template_categories`: each template's latest category per business account, name and language,
 *   as Meta's routing guide keeps it (Templates/Categories.ts).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE instances ADD COLUMN marketing_messages TEXT NOT NULL DEFAULT 'off'`
  yield* sql`CREATE TABLE template_categories (
    waba_id TEXT NOT NULL,
    name TEXT NOT NULL,
    language TEXT NOT NULL,
    category TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (waba_id, name, language)
  )`
})

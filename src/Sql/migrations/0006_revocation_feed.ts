import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The revocation feed: every revoked api token or session appends its hash here in the revoking
 * transaction, and each hub process reads the rows after the last sequence it saw about once a
 * second to drop those hashes from its credential cache (ApiTokens/RevocationFeed.ts), so a revocation made
 * by another process (the CLI, another replica) holds within about a second. The sequence must never
 * be reused, even after old rows are pruned: SQLite's AUTOINCREMENT, PostgreSQL's identity column.
 *
 * Sessions by organization serve `hub session revoke --org`.
 *
 * Secrets at rest change format in this release too (bound to their row, AccessTokenCipher.ts), but
 * not here: re-encrypting needs HUB_SECRET_KEY, which migrations do not have (they are plain SQL run
 * before any service). The stored text's version prefix tells the formats apart, and the cipher's
 * layer re-encrypts old rows at start, in one transaction, before anything reads them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    sqlite: () =>
      sql`CREATE TABLE revocations (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        token_hash TEXT NOT NULL,
        revoked_at TEXT NOT NULL
      )`,
    pg: () =>
      sql`CREATE TABLE revocations (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        token_hash TEXT NOT NULL,
        revoked_at TEXT NOT NULL
      )`,
    orElse: () => Effect.dieMessage("revocations: no table written for this database")
  })
  yield* sql`CREATE INDEX sessions_organization ON sessions (organization_id, expires_at)`
})

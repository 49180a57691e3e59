/**
 * SQL for api tokens and operator sessions. Only SHA-256 hashes of secrets are stored. Every
 * revocation appends the revoked hashes to the revocation feed in its own transaction, so every hub
 * process on the database can drop them from its cache (RevocationFeed.ts).
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { ApiTokenId, InstanceId, newId, nowIso, OrganizationId, SessionId } from "../Domain/Ids.js"
import type { InstanceRef, TokenKind } from "../Domain/Principal.js"
import { announce, channels } from "../Sql/Notify.js"
import { decodeRows, SqlBigint, SqlCount } from "../Sql/RowSchemas.js"
import { API_TOKEN_PREFIX, generateSecret, hashSecret, secretHint, SESSION_TOKEN_PREFIX } from "./Secrets.js"

export interface ApiTokenRow {
  readonly id: ApiTokenId
  readonly organization_id: OrganizationId
  readonly instance_id: InstanceId | null
  readonly name: string
  readonly token_hint: string
  readonly created_at: string
  readonly last_used_at: string | null
}

/** What a token hash resolves to, before the resolver checks kind and expiry. */
export interface Credential {
  readonly kind: TokenKind
  readonly credentialId: string
  readonly organizationId: OrganizationId
  readonly instance: InstanceRef | undefined
  /** Epoch milliseconds; sessions only. */
  readonly expiresAt: number | undefined
}

/** One row of the revocation feed. */
export interface Revocation {
  readonly seq: number
  readonly token_hash: string
}

// seq is a bigint on PostgreSQL, read as text.
const revocationRows = decodeRows(Schema.Struct({ seq: SqlBigint, token_hash: Schema.String }))
const lastRevocationRows = decodeRows(Schema.Struct({ seq: SqlCount }))

/** What a token hash finds: an API token (with its instance, if bound to one) or a session. */
const CredentialRow = Schema.Struct({
  kind: Schema.Literal("api", "session"),
  id: Schema.String,
  organization_id: OrganizationId,
  expires_at: Schema.NullOr(Schema.String),
  instance_id: Schema.NullOr(InstanceId),
  phone_number_id: Schema.NullOr(Schema.String),
  waba_id: Schema.NullOr(Schema.String)
})
type CredentialRow = typeof CredentialRow.Type
const credentialRows = decodeRows(CredentialRow)

const apiTokenRows = decodeRows(Schema.Struct({
  id: ApiTokenId,
  organization_id: OrganizationId,
  instance_id: Schema.NullOr(InstanceId),
  name: Schema.String,
  token_hint: Schema.String,
  created_at: Schema.String,
  last_used_at: Schema.NullOr(Schema.String)
}))

interface HashRow {
  readonly token_hash: string
}

const toCredential = (row: CredentialRow): Credential => ({
  kind: row.kind === "session" ? "session" : row.instance_id === null ? "organization" : "instance",
  credentialId: row.id,
  organizationId: row.organization_id,
  instance: row.instance_id !== null && row.phone_number_id !== null && row.waba_id !== null
    ? {
      id: row.instance_id,
      organizationId: row.organization_id,
      phoneNumberId: row.phone_number_id,
      wabaId: row.waba_id
    }
    : undefined,
  expiresAt: row.expires_at === null ? undefined : Date.parse(row.expires_at)
})

export class TokensRepo extends Context.Tag("TokensRepo")<TokensRepo, {
  readonly createApiToken: (input: {
    readonly organizationId: OrganizationId
    readonly instanceId: InstanceId | undefined
    readonly name: string
  }) => Effect.Effect<{ readonly row: ApiTokenRow; readonly secret: string }>
  readonly listApiTokens: (organizationId: OrganizationId) => Effect.Effect<ReadonlyArray<ApiTokenRow>>
  /** A live (not revoked) api token by id, whatever its organization (the operator's `token revoke`). */
  readonly findApiToken: (id: string) => Effect.Effect<Option.Option<ApiTokenRow>>
  /** Revokes a live token of the organization; returns its hash so caches can forget it. */
  readonly revokeApiToken: (organizationId: OrganizationId, id: string) => Effect.Effect<Option.Option<string>>
  /** Revokes a session (not yet revoked); returns its hash so caches can forget it. */
  readonly revokeSession: (id: string) => Effect.Effect<Option.Option<string>>
  /** Revokes every live session of an organization; returns their hashes. */
  readonly revokeOrganizationSessions: (organizationId: OrganizationId) => Effect.Effect<ReadonlyArray<string>>
  /** The feed's newest sequence number (0 when it is empty): a new reader starts after it. */
  readonly lastRevocation: Effect.Effect<number>
  /** The revocations committed after a sequence number, in order. */
  readonly revocationsAfter: (seq: number) => Effect.Effect<ReadonlyArray<Revocation>>
  /** Drops feed rows older than a time: no cache keeps an entry that long. */
  readonly pruneRevocations: (before: string) => Effect.Effect<void>
  readonly createSession: (organizationId: OrganizationId, ttlMillis: number) => Effect.Effect<{
    readonly id: SessionId
    readonly secret: string
    readonly expiresAt: string
  }>
  /** The live credential behind a secret's hash: not revoked; expiry is left to the caller. */
  readonly findCredential: (tokenHash: string) => Effect.Effect<Option.Option<Credential>>
  readonly touchApiToken: (id: string, at: string) => Effect.Effect<void>
}>() {}

/** A new API token's row, and its secret: shown once, only its hash is stored. */
const newApiToken = (input: {
  readonly organizationId: OrganizationId
  readonly instanceId: InstanceId | undefined
  readonly name: string
}): { readonly row: ApiTokenRow; readonly secret: string } => {
  const secret = generateSecret(API_TOKEN_PREFIX)
  const row: ApiTokenRow = {
    id: ApiTokenId.make(newId("tok")),
    organization_id: input.organizationId,
    instance_id: input.instanceId ?? null,
    name: input.name,
    token_hint: secretHint(secret),
    created_at: nowIso(),
    last_used_at: null
  }
  return { row, secret }
}

/** A new session of `ttlMillis` from now: its row, and its secret (shown once, only its hash is stored). */
const newSession = (organizationId: OrganizationId, ttlMillis: number) => {
  const secret = generateSecret(SESSION_TOKEN_PREFIX)
  const id = SessionId.make(newId("ses"))
  const now = Date.now()
  const expiresAt = new Date(now + ttlMillis).toISOString()
  const row = {
    id,
    organization_id: organizationId,
    token_hash: hashSecret(secret),
    created_at: new Date(now).toISOString(),
    expires_at: expiresAt
  }
  return { id, secret, expiresAt, row }
}

/** Runs a revoking UPDATE … RETURNING token_hash and appends the hashes to the feed, in one transaction. */
const revoking = (
  sql: SqlClient.SqlClient,
  update: (now: string) => Effect.Effect<ReadonlyArray<HashRow>, SqlError>
) =>
  Effect.gen(function*() {
    const now = nowIso()
    const hashes = (yield* update(now)).map((row) => row.token_hash)
    if (hashes.length > 0) {
      yield* sql`INSERT INTO revocations ${sql.insert(hashes.map((token_hash) => ({ token_hash, revoked_at: now })))}`
      // On PostgreSQL every replica hears it as this commits and evicts at once; the feed is the 1 s bound.
      yield* Effect.forEach(hashes, (hash) => announce(sql, channels.credentials, hash), { discard: true })
    }
    return hashes
  }).pipe(sql.withTransaction, Effect.orDie)

/** The live api token or session whose secret hashes to `tokenHash` (a token with its instance, if bound to one). */
const selectCredential = (sql: SqlClient.SqlClient, tokenHash: string) =>
  credentialRows(sql`
    SELECT 'api' AS kind, t.id, t.organization_id, NULL AS expires_at,
           t.instance_id, i.phone_number_id, i.waba_id
      FROM api_tokens t LEFT JOIN instances i ON i.id = t.instance_id
     WHERE t.token_hash = ${tokenHash} AND t.revoked_at IS NULL
    UNION ALL
    SELECT 'session' AS kind, s.id, s.organization_id, s.expires_at, NULL, NULL, NULL
      FROM sessions s
     WHERE s.token_hash = ${tokenHash} AND s.revoked_at IS NULL`)

export const TokensRepoLive = Layer.effect(
  TokensRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return TokensRepo.of({
      createApiToken: (input) => {
        const { row, secret } = newApiToken(input)
        return sql`INSERT INTO api_tokens ${sql.insert({ ...row, token_hash: hashSecret(secret) })}`.pipe(
          Effect.as({ row, secret }),
          Effect.orDie
        )
      },
      listApiTokens: (organizationId) =>
        apiTokenRows(sql`SELECT id, organization_id, instance_id, name, token_hint, created_at, last_used_at
          FROM api_tokens WHERE organization_id = ${organizationId} AND revoked_at IS NULL
          ORDER BY created_at DESC, id DESC`).pipe(Effect.orDie),
      findApiToken: (id) =>
        apiTokenRows(sql`SELECT id, organization_id, instance_id, name, token_hint, created_at, last_used_at
          FROM api_tokens WHERE id = ${id} AND revoked_at IS NULL`).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0])),
          Effect.orDie
        ),
      revokeApiToken: (organizationId, id) =>
        revoking(sql, (now) =>
          sql<HashRow>`UPDATE api_tokens SET revoked_at = ${now}
            WHERE id = ${id} AND organization_id = ${organizationId} AND revoked_at IS NULL
            RETURNING token_hash`).pipe(Effect.map((hashes) => Option.fromNullable(hashes[0]))),
      revokeSession: (id) =>
        revoking(sql, (now) =>
          sql<HashRow>`UPDATE sessions SET revoked_at = ${now}
            WHERE id = ${id} AND revoked_at IS NULL RETURNING token_hash`).pipe(
            Effect.map((hashes) => Option.fromNullable(hashes[0]))
          ),
      revokeOrganizationSessions: (organizationId) =>
        revoking(sql, (now) =>
          sql<HashRow>`UPDATE sessions SET revoked_at = ${now}
            WHERE organization_id = ${organizationId} AND revoked_at IS NULL AND expires_at > ${now}
            RETURNING token_hash`),
      lastRevocation: lastRevocationRows(sql`SELECT MAX(seq) AS seq FROM revocations`).pipe(
        Effect.map((rows) => rows[0]?.seq ?? 0),
        Effect.orDie
      ),
      revocationsAfter: (seq) =>
        revocationRows(sql`SELECT seq, token_hash FROM revocations WHERE seq > ${seq} ORDER BY seq`).pipe(
          Effect.orDie
        ),
      pruneRevocations: (before) =>
        sql`DELETE FROM revocations WHERE revoked_at < ${before}`.pipe(Effect.asVoid, Effect.orDie),
      createSession: (organizationId, ttlMillis) => {
        const { expiresAt, id, row, secret } = newSession(organizationId, ttlMillis)
        return sql`INSERT INTO sessions ${sql.insert(row)}`.pipe(Effect.as({ id, secret, expiresAt }), Effect.orDie)
      },
      findCredential: (tokenHash) =>
        selectCredential(sql, tokenHash).pipe(
          Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toCredential)),
          Effect.orDie
        ),
      touchApiToken: (id, at) =>
        sql`UPDATE api_tokens SET last_used_at = ${at} WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie)
    })
  })
)

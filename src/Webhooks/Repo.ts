/**
 * SQL for webhooks (this folder owns the table). Secrets are stored encrypted (the hub must sign with
 * them, so a hash would not do), and so are the values of custom headers named like secrets. A
 * webhook that stops being active (PATCH, DELETE, a 410, days of failures) goes through `deactivate`,
 * which cancels its queued deliveries in the same transaction; one whose per-person order is turned
 * off lets its held deliveries go in the same way (releaseLanes). An instance has at most a configured number of webhooks, counted in the creating
 * transaction (which holds the write lock, or on PostgreSQL the instance's row), so two creations
 * at once cannot both pass.
 */
import { SqlClient } from "@effect/sql"
import { Data, Effect, Option, Schema } from "effect"
import type { SigningColumns } from "../Delivery/Credentials.js"
import { ALL_KINDS, parseFilter, storedFilter } from "../Domain/EventKinds.js"
import { newId, nowIso } from "../Domain/Ids.js"
import {
  type DisabledReason,
  disabledReasons,
  type WebhookKind,
  webhookKinds,
  type WebhookOrdering,
  webhookOrderings
} from "../Domain/Vocabulary.js"
import { skipLocked } from "../Sql/Dialect.js"
import { announce, channels } from "../Sql/Notify.js"
import { countRows, decodeRows, SqlBoolean } from "../Sql/RowSchemas.js"
import { SecretCipher, type SecretCipherShape, SecretSlot } from "../Sql/SecretCipher.js"
import { isSecretHeader, REDACTED, sentHeaders, splitHeaders } from "./CustomHeaders.js"

/** Why the hub turned a webhook off: a 410 answer, failures without a success for too long, or its owner. */

export interface WebhookRow {
  readonly id: string
  readonly organization_id: string
  readonly instance_id: string
  readonly name: string
  /** Its url; empty for a poll webhook. */
  readonly url: string
  readonly kind: WebhookKind
  readonly active: boolean
  readonly disabled_reason: DisabledReason | null
  readonly failing_since: string | null
  /** The kinds it takes; undefined for every kind. */
  readonly events: ReadonlyArray<string> | undefined
  /** Its custom headers as stored: every name, secret ones with a null value (JSON), or null. */
  readonly headers: string | null
  readonly ordering: WebhookOrdering
  readonly created_at: string
  readonly updated_at: string
}

/** A webhook's columns as read (`columns`): `active` is 0/1 on SQLite; the filter and the reason are turned into a WebhookRow by toRow. */
const StoredWebhook = Schema.Struct({
  id: Schema.String,
  organization_id: Schema.String,
  instance_id: Schema.String,
  name: Schema.String,
  url: Schema.String,
  kind: Schema.Literal(...webhookKinds),
  active: SqlBoolean,
  disabled_reason: Schema.NullOr(Schema.String),
  failing_since: Schema.NullOr(Schema.String),
  events: Schema.NullOr(Schema.String),
  headers: Schema.NullOr(Schema.String),
  ordering: Schema.Literal(...webhookOrderings),
  created_at: Schema.String,
  updated_at: Schema.String
})
type StoredWebhook = typeof StoredWebhook.Type
const storedWebhooks = decodeRows(StoredWebhook)

/** Whose webhooks a request may see: its organization's, narrowed to one instance for instance tokens. */
export interface WebhookScope {
  readonly organizationId: string
  readonly instanceId: string | undefined
}

interface WebhookPatch {
  readonly url?: string | undefined
  readonly name?: string | undefined
  readonly active?: boolean | undefined
  /** The kinds it takes (`*` for all); absent keeps them. */
  readonly events?: ReadonlyArray<string> | undefined
  /** Replaces every custom header; absent keeps them. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Turned to `none`, every held delivery goes at once (releaseLanes). */
  readonly ordering?: WebhookOrdering | undefined
}

/** The instance already has as many webhooks as it may. */
class WebhookLimitReached extends Data.TaggedError("WebhookLimitReached")<{ readonly limit: number }> {}

/**
 * Secret headers given as "[redacted]" whose stored value cannot be kept: there is none, or the
 * webhook moves to another origin (its secrets are for the receiver they were given for).
 */
class NoSecretToKeep extends Data.TaggedError("NoSecretToKeep")<{
  readonly names: ReadonlyArray<string>
  readonly originChanged: boolean
}> {}

/** Whether a webhook's URL moves to another origin (scheme, host, port). */
const movesOrigin = (from: string, to: string | undefined): boolean =>
  to !== undefined && URL.parse(from)?.origin !== URL.parse(to)?.origin

interface WebhooksRepoShape {
  readonly create: (input: {
    readonly organizationId: string
    readonly instanceId: string
    readonly name: string
    readonly url: string
    /** push (the default) or poll (url empty). */
    readonly kind?: WebhookKind | undefined
    readonly secret: string
    readonly events?: ReadonlyArray<string> | undefined
    readonly headers?: Readonly<Record<string, string>> | undefined
    readonly ordering?: WebhookOrdering | undefined
    /** Most webhooks the instance may have, this one included; none when undefined. */
    readonly perInstance?: number | undefined
  }) => Effect.Effect<WebhookRow, WebhookLimitReached>
  /** The scope's webhooks, oldest first: of one instance, and taking one kind of event, when given. */
  readonly list: (
    scope: WebhookScope,
    filter: { readonly instanceId?: string | undefined; readonly event?: string | undefined }
  ) => Effect.Effect<ReadonlyArray<WebhookRow>>
  readonly find: (scope: WebhookScope, id: string) => Effect.Effect<Option.Option<WebhookRow>>
  /** What its deliveries are signed (and sent) with, as stored: for a poll's answer, signed as a push is. */
  readonly signing: (id: string) => Effect.Effect<SigningColumns | undefined>
  /** A secret header given as "[redacted]" keeps its stored value (a record read and sent back stays as it was). */
  readonly update: (
    scope: WebhookScope,
    id: string,
    patch: WebhookPatch
  ) => Effect.Effect<Option.Option<WebhookRow>, NoSecretToKeep>
  /** Removes a webhook (kept for its delivery log, never shown again); false when there was none. */
  readonly remove: (scope: WebhookScope, id: string) => Effect.Effect<boolean>
  /** Replaces the secret; the current one keeps signing as the previous secret until `previousUntil`. */
  readonly rotateSecret: (
    scope: WebhookScope,
    id: string,
    secret: string,
    previousUntil: string
  ) => Effect.Effect<Option.Option<WebhookRow>>
  /**
   * Turns an active webhook off for `reason` (the hub's own, from the dispatcher: a 410, days of
   * failures) and cancels its queued deliveries, in one transaction; false when it was not active.
   */
  readonly deactivate: (id: string, reason: DisabledReason) => Effect.Effect<boolean>
}

const columns =
  "id, organization_id, instance_id, name, url, kind, active, disabled_reason, failing_since, events, headers, ordering, created_at, updated_at"

const reasons: ReadonlySet<string> = new Set<DisabledReason>(disabledReasons)
const isReason = (reason: string): reason is DisabledReason => reasons.has(reason)

const toRow = (stored: StoredWebhook): WebhookRow => ({
  ...stored,
  disabled_reason: stored.disabled_reason === null
    ? null
    : isReason(stored.disabled_reason)
    ? stored.disabled_reason
    : "manual",
  events: parseFilter(stored.events)
})

/**
 * Turns a webhook off and cancels its queued deliveries (run it in a transaction): for `reason`,
 * or keeping the one it has when undefined (a removal). Returns whether it was active. Every
 * way a webhook stops taking deliveries goes through here.
 */
const deactivate = (sql: SqlClient.SqlClient, id: string, reason: DisabledReason | undefined, now: string) =>
  Effect.gen(function*() {
    const deactivated = yield* sql`UPDATE webhooks SET active = 0,
        ${reason === undefined ? sql`` : sql`disabled_reason = ${reason},`} updated_at = ${now}
      WHERE id = ${id} AND active = 1 RETURNING id`
    yield* sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = ${now}
      WHERE webhook_id = ${id} AND status IN ('pending', 'failed')`
    return deactivated.length > 0
  })

/**
 * Per-person order turned off: every held delivery is due at once (from its creation, as pending
 * rows are); every replica is told. The rows keep their lanes (Delivery/Lanes.ts): a delivery an
 * ingress queued behind them as this commits is still made due when the one before it ends.
 * Rows locked meanwhile are passed over (PostgreSQL): a round is making them due (advance), and
 * waiting for it here could deadlock with it (it holds the lane's lock, this the other rows).
 */
const releaseLanes = (sql: SqlClient.SqlClient, id: string, now: string) =>
  Effect.gen(function*() {
    const released = yield* sql`UPDATE deliveries SET next_attempt_at = created_at, updated_at = ${now}
      WHERE id IN (SELECT id FROM deliveries
        WHERE webhook_id = ${id} AND contact_key IS NOT NULL AND status IN ('pending', 'failed')
          AND status = 'pending' AND next_attempt_at IS NULL ${skipLocked(sql)})
      RETURNING id`
    if (released.length > 0) yield* announce(sql, channels.outbox, "released")
  })

/**
 * `headers` with each secret one given as "[redacted]" replaced by its stored value. Names arrive
 * lower case (CustomHeadersInput), as they are stored.
 */
const keepingSecrets = (
  sql: SqlClient.SqlClient,
  cipher: SecretCipherShape,
  current: WebhookRow,
  headers: Readonly<Record<string, string>>,
  originChanged: boolean
) =>
  Effect.gen(function*() {
    const kept = Object.entries(headers).filter(([name, value]) => value === REDACTED && isSecretHeader(name)).map((
      [name]
    ) => name)
    if (kept.length === 0) return headers
    if (originChanged) return yield* new NoSecretToKeep({ names: kept, originChanged })
    const [row] = yield* sql<
      { readonly headers_encrypted: string | null }
    >`SELECT headers_encrypted FROM webhooks WHERE id = ${current.id}`
    const secret = row?.headers_encrypted == null
      ? null
      : yield* Effect.orDie(cipher.decrypt(row.headers_encrypted, SecretSlot.webhookHeaders(current.id)))
    const stored = sentHeaders(current.headers, secret)
    const missing = kept.filter((name) => stored[name] === undefined)
    if (missing.length > 0) return yield* new NoSecretToKeep({ names: missing, originChanged })
    return { ...headers, ...Object.fromEntries(kept.map((name) => [name, stored[name] ?? ""])) }
  })

/** The columns custom headers are stored in: plain ones as JSON, secret ones encrypted. */
const headerColumns = (cipher: SecretCipherShape, webhookId: string, headers: Readonly<Record<string, string>>) => {
  const stored = splitHeaders(headers)
  return {
    headers: stored.shown,
    headers_encrypted: stored.secret === null
      ? null
      : cipher.encrypt(stored.secret, SecretSlot.webhookHeaders(webhookId))
  }
}

/** Serializes creations on an instance: SQLite's transactions already hold the write lock; PostgreSQL locks the row. */
const lockInstance = (sql: SqlClient.SqlClient, instanceId: string) =>
  sql.onDialectOrElse({
    pg: () => Effect.asVoid(sql`SELECT id FROM instances WHERE id = ${instanceId} FOR UPDATE`),
    orElse: () => Effect.void
  })

/** A new webhook, within its instance's limit when one is given (counted in the creating transaction). */
const insertWebhook = (
  sql: SqlClient.SqlClient,
  cipher: SecretCipherShape,
  input: Parameters<WebhooksRepoShape["create"]>[0]
) =>
  Effect.gen(function*() {
    const now = nowIso()
    const { perInstance } = input
    if (perInstance !== undefined) {
      yield* lockInstance(sql, input.instanceId)
      const [counted] = yield* countRows(sql`SELECT COUNT(*) AS n FROM webhooks
        WHERE instance_id = ${input.instanceId} AND deleted_at IS NULL`)
      if ((counted?.n ?? 0) >= perInstance) return yield* new WebhookLimitReached({ limit: perInstance })
    }
    const id = newId("whk")
    const headers = headerColumns(cipher, id, input.headers ?? {})
    const row: StoredWebhook = {
      id,
      organization_id: input.organizationId,
      instance_id: input.instanceId,
      name: input.name,
      url: input.url,
      kind: input.kind ?? "push",
      active: true,
      disabled_reason: null,
      failing_since: null,
      events: storedFilter(input.events),
      headers: headers.headers,
      ordering: input.ordering ?? "none",
      created_at: now,
      updated_at: now
    }
    yield* sql`INSERT INTO webhooks ${
      sql.insert({
        ...row,
        active: 1,
        headers_encrypted: headers.headers_encrypted,
        secret_encrypted: cipher.encrypt(input.secret, SecretSlot.webhookSecret(row.id))
      })
    }`
    return toRow(row)
  }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die))

/** The webhooks table: its rows, their secrets and custom headers, and turning a webhook off. */
export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("WebhooksRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const cipher = yield* SecretCipher

    const scoped = (scope: WebhookScope) =>
      scope.instanceId === undefined
        ? sql`organization_id = ${scope.organizationId}`
        : sql`organization_id = ${scope.organizationId} AND instance_id = ${scope.instanceId}`

    const find = (scope: WebhookScope, id: string) =>
      storedWebhooks(sql`SELECT ${sql.literal(columns)} FROM webhooks
        WHERE id = ${id} AND deleted_at IS NULL AND ${scoped(scope)}`).pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow))
      )

    const service: WebhooksRepoShape = {
      create: (input) => insertWebhook(sql, cipher, input),
      list: (scope, filter) =>
        storedWebhooks(sql`SELECT ${sql.literal(columns)} FROM webhooks
          WHERE deleted_at IS NULL AND ${scoped(scope)}
          ${filter.instanceId === undefined ? sql`` : sql`AND instance_id = ${filter.instanceId}`}
          ORDER BY created_at, id`).pipe(
          Effect.map((rows) => {
            const all = rows.map(toRow)
            const { event } = filter
            return event === undefined || event === ALL_KINDS
              ? all
              : all.filter((w) => w.events === undefined || w.events.includes(event))
          }),
          Effect.orDie
        ),
      find: (scope, id) => Effect.orDie(find(scope, id)),
      signing: (id) =>
        sql<
          SigningColumns
        >`SELECT id AS webhook_id, secret_encrypted, previous_secret_encrypted, previous_secret_expires_at,
            headers, headers_encrypted FROM webhooks WHERE id = ${id}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        ),
      update: (scope, id, patch) =>
        Effect.gen(function*() {
          const current = yield* find(scope, id)
          if (Option.isNone(current)) return current
          const now = nowIso()
          // A secret header is for the receiver it was given for: moved to another origin, it is dropped
          // unless this request gives it again (else anyone who may PATCH could read it at their own URL).
          const originChanged = movesOrigin(current.value.url, patch.url)
          const headers = patch.headers !== undefined
            ? yield* keepingSecrets(sql, cipher, current.value, patch.headers, originChanged)
            : originChanged
            ? sentHeaders(current.value.headers, null)
            : undefined
          const reactivated = patch.active === true && !current.value.active
          const deactivated = patch.active === false && current.value.active
          yield* sql`UPDATE webhooks SET ${
            sql.update({
              url: patch.url ?? current.value.url,
              name: patch.name ?? current.value.name,
              // Turned off below, by deactivate.
              active: (current.value.active || reactivated) ? 1 : 0,
              updated_at: now,
              ...(patch.events === undefined ? {} : { events: storedFilter(patch.events) }),
              ...(headers === undefined ? {} : headerColumns(cipher, id, headers)),
              ...(patch.ordering === undefined ? {} : { ordering: patch.ordering }),
              // Turning a webhook back on starts a fresh record: no reason, no failure streak.
              ...(reactivated ? { disabled_reason: null, failing_since: null } : {})
            })
          } WHERE id = ${id}`
          if (deactivated) yield* deactivate(sql, id, "manual", now)
          if (patch.ordering === "none" && current.value.ordering !== "none") yield* releaseLanes(sql, id, now)
          return yield* find(scope, id)
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die)),
      remove: (scope, id) =>
        Effect.gen(function*() {
          const now = nowIso()
          const removed = yield* sql<
            { readonly id: string }
          >`UPDATE webhooks SET deleted_at = ${now}, updated_at = ${now}
            WHERE id = ${id} AND deleted_at IS NULL AND ${scoped(scope)} RETURNING id`
          if (removed.length === 0) return false
          yield* deactivate(sql, id, undefined, now)
          return true
        }).pipe(sql.withTransaction, Effect.orDie),
      rotateSecret: (scope, id, secret, previousUntil) =>
        Effect.gen(function*() {
          const current = yield* sql<{ readonly secret_encrypted: string }>`SELECT secret_encrypted FROM webhooks
            WHERE id = ${id} AND deleted_at IS NULL AND ${scoped(scope)}`
          const stored = current[0]?.secret_encrypted
          if (stored === undefined) return Option.none<WebhookRow>()
          // Secrets are bound to their column: the current one is encrypted afresh for the previous one's.
          const previous = yield* cipher.decrypt(stored, SecretSlot.webhookSecret(id))
          yield* sql`UPDATE webhooks SET ${
            sql.update({
              previous_secret_encrypted: cipher.encrypt(previous, SecretSlot.webhookPreviousSecret(id)),
              previous_secret_expires_at: previousUntil,
              secret_encrypted: cipher.encrypt(secret, SecretSlot.webhookSecret(id)),
              updated_at: nowIso()
            })
          } WHERE id = ${id}`
          return yield* find(scope, id)
        }).pipe(sql.withTransaction, Effect.orDie),
      deactivate: (id, reason) => deactivate(sql, id, reason, nowIso()).pipe(sql.withTransaction, Effect.orDie)
    }
    return service
  })
}) {}

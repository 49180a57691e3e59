/**
 * SQL for webhooks. Secrets are stored encrypted (the hub must sign with them, so a hash would not do).
 * A webhook that stops being active (PATCH, DELETE, a 410, days of failures) has its queued
 * deliveries cancelled in the same transaction.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { newId, nowIso } from "../Domain/Ids.js"
import { AccessTokenCipher, SecretSlot } from "../Instances/AccessTokenCipher.js"

export interface WebhookRow {
  readonly id: string
  readonly organization_id: string
  readonly instance_id: string
  readonly name: string
  readonly url: string
  readonly active: boolean
  readonly disabled_reason: string | null
  readonly created_at: string
  readonly updated_at: string
}

interface StoredWebhook extends Omit<WebhookRow, "active"> {
  readonly active: number | boolean
}

/** Whose webhooks a request may see: its organization's, narrowed to one instance for instance tokens. */
export interface WebhookScope {
  readonly organizationId: string
  readonly instanceId: string | undefined
}

export interface WebhookPatch {
  readonly url?: string | undefined
  readonly name?: string | undefined
  readonly active?: boolean | undefined
}

export class WebhooksRepo extends Context.Tag("WebhooksRepo")<WebhooksRepo, {
  readonly create: (input: {
    readonly organizationId: string
    readonly instanceId: string
    readonly name: string
    readonly url: string
    readonly secret: string
  }) => Effect.Effect<WebhookRow>
  readonly list: (scope: WebhookScope, instanceId: string | undefined) => Effect.Effect<ReadonlyArray<WebhookRow>>
  readonly find: (scope: WebhookScope, id: string) => Effect.Effect<Option.Option<WebhookRow>>
  readonly update: (scope: WebhookScope, id: string, patch: WebhookPatch) => Effect.Effect<Option.Option<WebhookRow>>
  /** Removes a webhook (kept for its delivery log, never shown again); false when there was none. */
  readonly remove: (scope: WebhookScope, id: string) => Effect.Effect<boolean>
  /** Replaces the secret; the current one keeps signing as the previous secret until `previousUntil`. */
  readonly rotateSecret: (scope: WebhookScope, id: string, secret: string, previousUntil: string) => Effect.Effect<Option.Option<WebhookRow>>
}>() {}

const columns = "id, organization_id, instance_id, name, url, active, disabled_reason, created_at, updated_at"

const toRow = (stored: StoredWebhook): WebhookRow => ({ ...stored, active: Boolean(stored.active) })

export const WebhooksRepoLive = Layer.effect(
  WebhooksRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const cipher = yield* AccessTokenCipher

    const scoped = (scope: WebhookScope) =>
      scope.instanceId === undefined
        ? sql`organization_id = ${scope.organizationId}`
        : sql`organization_id = ${scope.organizationId} AND instance_id = ${scope.instanceId}`

    const find = (scope: WebhookScope, id: string) =>
      sql<StoredWebhook>`SELECT ${sql.literal(columns)} FROM webhooks
        WHERE id = ${id} AND deleted_at IS NULL AND ${scoped(scope)}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRow))
      )

    const cancelQueued = (webhookId: string, now: string) =>
      sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = ${now}
        WHERE webhook_id = ${webhookId} AND status IN ('pending', 'failed')`

    return WebhooksRepo.of({
      create: (input) => {
        const now = nowIso()
        const row: WebhookRow = {
          id: newId("whk"),
          organization_id: input.organizationId,
          instance_id: input.instanceId,
          name: input.name,
          url: input.url,
          active: true,
          disabled_reason: null,
          created_at: now,
          updated_at: now
        }
        return sql`INSERT INTO webhooks ${
          sql.insert({ ...row, active: 1, secret_encrypted: cipher.encrypt(input.secret, SecretSlot.webhookSecret(row.id)) })
        }`.pipe(
          Effect.as(row),
          Effect.orDie
        )
      },
      list: (scope, instanceId) =>
        sql<StoredWebhook>`SELECT ${sql.literal(columns)} FROM webhooks
          WHERE deleted_at IS NULL AND ${scoped(scope)}
          ${instanceId === undefined ? sql`` : sql`AND instance_id = ${instanceId}`}
          ORDER BY created_at, id`.pipe(Effect.map((rows) => rows.map(toRow)), Effect.orDie),
      find: (scope, id) => Effect.orDie(find(scope, id)),
      update: (scope, id, patch) =>
        Effect.gen(function*() {
          const current = yield* find(scope, id)
          if (Option.isNone(current)) return current
          const now = nowIso()
          const reactivated = patch.active === true && !current.value.active
          const deactivated = patch.active === false && current.value.active
          yield* sql`UPDATE webhooks SET ${
            sql.update({
              url: patch.url ?? current.value.url,
              name: patch.name ?? current.value.name,
              active: (patch.active ?? current.value.active) ? 1 : 0,
              updated_at: now,
              // Turning a webhook back on starts a fresh record: no reason, no failure streak.
              ...(reactivated ? { disabled_reason: null, failing_since: null } : {}),
              ...(deactivated ? { disabled_reason: "deactivated by its owner" } : {})
            })
          } WHERE id = ${id}`
          if (deactivated) yield* cancelQueued(id, now)
          return yield* find(scope, id)
        }).pipe(sql.withTransaction, Effect.orDie),
      remove: (scope, id) =>
        Effect.gen(function*() {
          const now = nowIso()
          const removed = yield* sql<{ readonly id: string }>`UPDATE webhooks SET deleted_at = ${now}, active = 0, updated_at = ${now}
            WHERE id = ${id} AND deleted_at IS NULL AND ${scoped(scope)} RETURNING id`
          if (removed.length === 0) return false
          yield* cancelQueued(id, now)
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
        }).pipe(sql.withTransaction, Effect.orDie)
    })
  })
)

/**
 * SQL for the events outbox: accepted changes (deduplicated by key), the envelope each instance
 * receives, one delivery row per active webhook, leases taken by dispatchers, and the attempt log.
 * Leases are plain column updates (owner + expiry), so a crashed hub's rows are taken again once
 * their lease has expired, by whichever process looks next.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { type InstanceId, newId, nowIso, type OrganizationId } from "../Domain/Ids.js"

export interface AcceptedChange {
  readonly dedupeKey: string
  readonly eventId: string
}

export interface EventRecord {
  readonly id: string
  readonly instanceId: string
  /** The exact JSON text every webhook of the instance receives. */
  readonly body: string
  readonly changeCount: number
}

export interface UnroutedChange {
  readonly phoneNumberId: string | null
  readonly wabaId: string | null
  readonly field: string | null
  readonly changeJson: string
}

/** A delivery leased by a dispatcher, with what it needs to send it. */
export interface LeasedDelivery {
  readonly id: string
  readonly webhook_id: string
  readonly message_id: string
  readonly status: string
  readonly attempts: number
  readonly final_attempt: number | null
  readonly next_attempt_at: string
  readonly body: string
  readonly url: string
  readonly webhook_active: number | boolean
  readonly secret_encrypted: string
  readonly previous_secret_encrypted: string | null
  readonly previous_secret_expires_at: string | null
}

export type DeliveryStatus = "pending" | "failed" | "succeeded" | "dead" | "cancelled"

export interface DeliveryRow {
  readonly id: string
  readonly webhook_id: string
  readonly event_id: string
  readonly message_id: string
  readonly status: DeliveryStatus
  readonly attempts: number
  readonly next_attempt_at: string | null
  readonly last_status_code: number | null
  readonly last_error: string | null
  readonly created_at: string
  readonly updated_at: string
}

export interface AttemptRow {
  readonly delivery_id: string
  readonly attempt: number
  readonly started_at: string
  readonly status_code: number | null
  readonly latency_ms: number
  readonly error: string | null
  readonly response_snippet: string | null
}

/** What became of one attempt, decided by the dispatcher. */
export type AttemptResult =
  | { readonly _tag: "Succeeded" }
  | { readonly _tag: "RetryAt"; readonly at: string }
  | { readonly _tag: "Dead" }

export interface AttemptRecord {
  readonly delivery: LeasedDelivery
  readonly owner: string
  readonly attempt: number
  readonly startedAt: string
  readonly finishedAt: string
  readonly latencyMs: number
  readonly statusCode: number | null
  readonly error: string | null
  readonly responseSnippet: string | null
  readonly result: AttemptResult
}

export type ReplayOutcome = "requeued" | "not_found" | "already_queued"

/** SQLite allows 32766 bound values per statement; 14 columns a row stays well below at this size. */
const INSERT_CHUNK = 500

const chunks = <A>(items: ReadonlyArray<A>, size: number): ReadonlyArray<ReadonlyArray<A>> =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, i * size + size))

const deliveryColumns = "id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, last_status_code, last_error, created_at, updated_at"

/** An instance an upstream change can be routed to. */
export interface RouteRow {
  readonly id: InstanceId
  readonly organization_id: OrganizationId
  readonly phone_number_id: string
  readonly waba_id: string
}

export class OutboxRepo extends Context.Tag("OutboxRepo")<OutboxRepo, {
  /** The instances bound to any of these phone number ids or business accounts. */
  readonly routes: (phoneNumberIds: ReadonlyArray<string>, wabaIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<RouteRow>>
  /** Records change keys; returns the keys that were new (a key seen before is a duplicate). */
  readonly acceptChanges: (changes: ReadonlyArray<AcceptedChange>, now: string) => Effect.Effect<ReadonlySet<string>>
  readonly insertEvents: (events: ReadonlyArray<EventRecord>, now: string) => Effect.Effect<void>
  readonly insertUnrouted: (changes: ReadonlyArray<UnroutedChange>, now: string) => Effect.Effect<void>
  /** One pending delivery per active webhook of each event's instance; returns how many. */
  readonly enqueue: (events: ReadonlyArray<EventRecord>, now: string) => Effect.Effect<number>
  /** Leases due deliveries, first attempts before retries, skipping the given webhooks. */
  readonly lease: (input: {
    readonly owner: string
    readonly now: string
    readonly leaseUntil: string
    readonly limit: number
    readonly skipWebhooks: ReadonlyArray<string>
  }) => Effect.Effect<ReadonlyArray<LeasedDelivery>>
  /** Cancels leased rows whose webhook is no longer active. */
  readonly cancel: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Gives leased rows back so they are taken at once (by this or another process). */
  readonly release: (owner: string, ids: ReadonlyArray<string> | "all") => Effect.Effect<void>
  /** Logs an attempt and moves the delivery on; returns since when its webhook has been failing, if it is. */
  readonly recordAttempt: (record: AttemptRecord) => Effect.Effect<string | null>
  readonly listForWebhook: (webhookId: string, query: {
    readonly status?: DeliveryStatus | undefined
    readonly page: number
    readonly limit: number
  }) => Effect.Effect<{ readonly rows: ReadonlyArray<DeliveryRow>; readonly attempts: ReadonlyArray<AttemptRow>; readonly total: number }>
  readonly find: (webhookId: string, id: string) => Effect.Effect<DeliveryRow | undefined>
  readonly findAttempts: (id: string) => Effect.Effect<ReadonlyArray<AttemptRow>>
  /** Sends a delivery again: a finished one gets one more attempt with the same webhook-id; a retry waiting is due now. */
  readonly replay: (webhookId: string, id: string, now: string) => Effect.Effect<ReplayOutcome>
}>() {}

export const OutboxRepoLive = Layer.effect(
  OutboxRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const leasePhase = (
      status: "pending" | "failed",
      input: { readonly owner: string; readonly now: string; readonly leaseUntil: string; readonly skipWebhooks: ReadonlyArray<string> },
      limit: number
    ) =>
      // The lease conditions are repeated outside the subquery so that a concurrent leaser (Postgres
      // re-checks the outer WHERE after a row lock) can never take the same row twice.
      sql<{ readonly id: string }>`UPDATE deliveries SET lease_owner = ${input.owner}, lease_expires_at = ${input.leaseUntil}
        WHERE id IN (
          SELECT id FROM deliveries
          WHERE status = ${status} AND next_attempt_at <= ${input.now}
            AND (lease_expires_at IS NULL OR lease_expires_at < ${input.now})
            AND NOT (${sql.in("webhook_id", input.skipWebhooks)})
          ORDER BY next_attempt_at
          LIMIT ${limit})
        AND status = ${status} AND (lease_expires_at IS NULL OR lease_expires_at < ${input.now})
        RETURNING id`

    return OutboxRepo.of({
      routes: (phoneNumberIds, wabaIds) =>
        sql<RouteRow>`SELECT id, organization_id, phone_number_id, waba_id FROM instances
          WHERE ${sql.in("phone_number_id", phoneNumberIds)} OR ${sql.in("waba_id", wabaIds)}`.pipe(Effect.orDie),
      acceptChanges: (changes, now) =>
        Effect.forEach(chunks(changes, INSERT_CHUNK), (chunk) =>
          sql<{ readonly dedupe_key: string }>`INSERT INTO event_changes ${
            sql.insert(chunk.map((c) => ({ dedupe_key: c.dedupeKey, event_id: c.eventId, received_at: now })))
          } ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key`).pipe(
          Effect.map((results) => new Set(results.flat().map((row) => row.dedupe_key))),
          Effect.orDie
        ),
      insertEvents: (events, now) =>
        Effect.forEach(chunks(events, INSERT_CHUNK), (chunk) =>
          sql`INSERT INTO events ${
            sql.insert(chunk.map((e) => ({
              id: e.id,
              instance_id: e.instanceId,
              body: e.body,
              change_count: e.changeCount,
              received_at: now
            })))
          }`, { discard: true }).pipe(Effect.orDie),
      insertUnrouted: (changes, now) =>
        Effect.forEach(chunks(changes, INSERT_CHUNK), (chunk) =>
          sql`INSERT INTO unrouted_events ${
            sql.insert(chunk.map((c) => ({
              id: newId("unr"),
              phone_number_id: c.phoneNumberId,
              waba_id: c.wabaId,
              field: c.field,
              change_json: c.changeJson,
              received_at: now
            })))
          }`, { discard: true }).pipe(Effect.orDie),
      enqueue: (events, now) =>
        Effect.gen(function*() {
          if (events.length === 0) return 0
          const instanceIds = [...new Set(events.map((e) => e.instanceId))]
          const webhooks = yield* sql<{ readonly id: string; readonly instance_id: string }>`
            SELECT id, instance_id FROM webhooks
            WHERE ${sql.in("instance_id", instanceIds)} AND active = 1 AND deleted_at IS NULL`
          const rows = events.flatMap((event) =>
            webhooks.filter((w) => w.instance_id === event.instanceId).map((webhook) => ({
              id: newId("dlv"),
              webhook_id: webhook.id,
              event_id: event.id,
              message_id: newId("msg"),
              status: "pending",
              attempts: 0,
              next_attempt_at: now,
              created_at: now,
              updated_at: now
            }))
          )
          yield* Effect.forEach(chunks(rows, INSERT_CHUNK), (chunk) => sql`INSERT INTO deliveries ${sql.insert(chunk)}`, {
            discard: true
          })
          return rows.length
        }).pipe(Effect.orDie),
      lease: (input) =>
        Effect.gen(function*() {
          const first = yield* leasePhase("pending", input, input.limit)
          const retries = first.length < input.limit ? yield* leasePhase("failed", input, input.limit - first.length) : []
          const ids = [...first, ...retries].map((row) => row.id)
          if (ids.length === 0) return []
          const rows = yield* sql<LeasedDelivery>`
            SELECT d.id, d.webhook_id, d.message_id, d.status, d.attempts, d.final_attempt, d.next_attempt_at, e.body, w.url,
                   w.active AS webhook_active, w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at
              FROM deliveries d
              JOIN events e ON e.id = d.event_id
              JOIN webhooks w ON w.id = d.webhook_id
             WHERE ${sql.in("d.id", ids)} AND d.lease_owner = ${input.owner}`
          // RETURNING gives no order; first attempts go first, each phase by due time.
          const phase = (row: LeasedDelivery) => (row.status === "pending" ? 0 : 1)
          return [...rows].sort((a, b) => phase(a) - phase(b) || a.next_attempt_at.localeCompare(b.next_attempt_at))
        }).pipe(Effect.orDie),
      cancel: (ids) =>
        sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
            updated_at = ${nowIso()}
          WHERE ${sql.in("id", ids)} AND status IN ('pending', 'failed')`.pipe(Effect.asVoid, Effect.orDie),
      release: (owner, ids) =>
        (ids === "all"
          ? sql`UPDATE deliveries SET lease_owner = NULL, lease_expires_at = NULL
              WHERE lease_owner = ${owner} AND status IN ('pending', 'failed')`
          : ids.length === 0
          ? Effect.void
          : sql`UPDATE deliveries SET lease_owner = NULL, lease_expires_at = NULL
              WHERE lease_owner = ${owner} AND ${sql.in("id", ids)}`).pipe(Effect.asVoid, Effect.orDie),
      recordAttempt: (record) =>
        Effect.gen(function*() {
          const { delivery, result } = record
          const now = record.finishedAt
          yield* sql`INSERT INTO delivery_attempts ${
            sql.insert({
              id: newId("att"),
              delivery_id: delivery.id,
              attempt: record.attempt,
              started_at: record.startedAt,
              status_code: record.statusCode,
              latency_ms: record.latencyMs,
              error: record.error,
              response_snippet: record.responseSnippet
            })
          }`
          const outcome = {
            attempts: record.attempt,
            last_status_code: record.statusCode,
            last_error: record.error,
            lease_owner: null,
            lease_expires_at: null,
            updated_at: now
          }
          if (result._tag === "Succeeded") {
            // A success stands even if the webhook was disabled meanwhile: the receiver has the event.
            yield* sql`UPDATE deliveries SET ${sql.update({ ...outcome, status: "succeeded", next_attempt_at: null })}
              WHERE id = ${delivery.id} AND lease_owner = ${record.owner}`
            yield* sql`UPDATE webhooks SET failing_since = NULL WHERE id = ${delivery.webhook_id} AND failing_since IS NOT NULL`
            return null
          }
          const next = result._tag === "RetryAt"
            ? { status: "failed", next_attempt_at: result.at }
            : { status: "dead", next_attempt_at: null }
          yield* sql`UPDATE deliveries SET ${sql.update({ ...outcome, ...next })}
            WHERE id = ${delivery.id} AND lease_owner = ${record.owner} AND status IN ('pending', 'failed')`
          const failing = yield* sql<{ readonly failing_since: string }>`UPDATE webhooks
            SET failing_since = COALESCE(failing_since, ${now}) WHERE id = ${delivery.webhook_id} RETURNING failing_since`
          return failing[0]?.failing_since ?? null
        }).pipe(sql.withTransaction, Effect.orDie),
      listForWebhook: (webhookId, query) =>
        Effect.gen(function*() {
          const filter = query.status === undefined ? sql`` : sql`AND status = ${query.status}`
          const rows = yield* sql<DeliveryRow>`SELECT ${sql.literal(deliveryColumns)} FROM deliveries
            WHERE webhook_id = ${webhookId} ${filter}
            ORDER BY created_at DESC, id DESC LIMIT ${query.limit} OFFSET ${(query.page - 1) * query.limit}`
          const counted = yield* sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM deliveries WHERE webhook_id = ${webhookId} ${filter}`
          const attempts = rows.length === 0 ? [] : yield* sql<AttemptRow>`
            SELECT delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
              FROM delivery_attempts WHERE ${sql.in("delivery_id", rows.map((r) => r.id))}
             ORDER BY delivery_id, attempt, started_at`
          return { rows, attempts, total: Number(counted[0]?.n ?? 0) }
        }).pipe(Effect.orDie),
      find: (webhookId, id) =>
        sql<DeliveryRow>`SELECT ${sql.literal(deliveryColumns)} FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        ),
      findAttempts: (id) =>
        sql<AttemptRow>`SELECT delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
          FROM delivery_attempts WHERE delivery_id = ${id} ORDER BY attempt, started_at`.pipe(Effect.orDie),
      replay: (webhookId, id, now) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ readonly status: DeliveryStatus; readonly lease_expires_at: string | null }>`
            SELECT status, lease_expires_at FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`
          const row = rows[0]
          if (row === undefined) return "not_found"
          const leased = row.lease_expires_at !== null && row.lease_expires_at >= now
          if (row.status === "pending" || (row.status === "failed" && leased)) return "already_queued"
          if (row.status === "failed") {
            // A retry waiting for its time is simply made due; its schedule goes on from there.
            yield* sql`UPDATE deliveries SET status = 'pending', next_attempt_at = ${now}, updated_at = ${now} WHERE id = ${id}`
          } else {
            yield* sql`UPDATE deliveries SET status = 'pending', next_attempt_at = ${now}, final_attempt = attempts + 1,
                lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
              WHERE id = ${id}`
          }
          return "requeued"
        }).pipe(sql.withTransaction, Effect.orDie)
    })
  })
)

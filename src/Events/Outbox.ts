/**
 * SQL for the events outbox: accepted changes (deduplicated by key), the envelope each instance
 * receives, one delivery row per active webhook, leases taken by dispatchers, and the attempt log.
 * Leases are plain column updates (owner + expiry), so a crashed hub's rows are taken again once
 * their lease has expired, by whichever process looks next.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { type InstanceId, newId, nowIso, type OrganizationId } from "../Domain/Ids.js"
import { announce, channels } from "../Sql/Notify.js"
import { isPostgres } from "../Sql/Dialect.js"
import { insertRows, rowStatement } from "../Sql/RowStatement.js"
import { padded } from "../Sql/SqlShapes.js"
import { type LeaseRequest, makeLease } from "./Lease.js"

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
  /** As read at lease time: a success clears it. */
  readonly webhook_failing_since: string | null
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
  readonly attempt: number
  readonly startedAt: string
  readonly finishedAt: string
  readonly latencyMs: number
  readonly statusCode: number | null
  readonly error: string | null
  readonly responseSnippet: string | null
  readonly result: AttemptResult
}

/** How a new delivery may skip the queue (see Handoff.ts): admitted rows are written leased to `owner` until `leaseUntil`. */
export interface Handover {
  readonly owner: string
  readonly leaseUntil: string
  readonly admit: (webhookId: string) => boolean
  /**
   * Each admitted row, with what it takes to send it, is added here as it is admitted: if its write
   * or the transaction then fails, the caller still knows which rows' room to give back.
   */
  readonly admitted: Array<LeasedDelivery>
}

export type ReplayOutcome = "requeued" | "not_found" | "already_queued"

const deliveryColumns = "id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, last_status_code, last_error, created_at, updated_at"

/** An active webhook new deliveries are queued for, with what it takes to send one at once. */
interface QueueingWebhook {
  readonly id: string
  readonly instance_id: string
  readonly url: string
  readonly failing_since: string | null
  readonly secret_encrypted: string
  readonly previous_secret_encrypted: string | null
  readonly previous_secret_expires_at: string | null
}

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
  /**
   * Records change keys; returns the new keys with the event that holds each (a key seen before is a
   * duplicate; a key given twice is kept for its first event).
   */
  readonly acceptChanges: (changes: ReadonlyArray<AcceptedChange>, now: string) => Effect.Effect<ReadonlyMap<string, string>>
  readonly insertEvents: (events: ReadonlyArray<EventRecord>, now: string) => Effect.Effect<void>
  readonly insertUnrouted: (changes: ReadonlyArray<UnroutedChange>, now: string) => Effect.Effect<void>
  /**
   * One pending delivery per active webhook of each event's instance; returns how many per event id.
   * The rows `handover` admits are written leased to its owner and added to `handover.admitted`.
   */
  readonly enqueue: (events: ReadonlyArray<EventRecord>, now: string, handover?: Handover) => Effect.Effect<ReadonlyMap<string, number>>
  /**
   * Leases due deliveries, first attempts before retries, at most `limit` in all and at most
   * `perWebhook` minus its attempts in flight for each webhook.
   */
  readonly lease: (input: LeaseRequest) => Effect.Effect<ReadonlyArray<LeasedDelivery>>
  /** Cancels leased rows whose webhook is no longer active. */
  readonly cancel: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Gives leased rows back so they are taken at once (by this or another process). */
  readonly release: (owner: string, ids: ReadonlyArray<string> | "all") => Effect.Effect<void>
  /**
   * Logs attempts and moves their deliveries on, in a few multi-row statements (run it in a
   * transaction); returns, for each webhook with a failed attempt, since when it has been failing.
   */
  readonly recordAttempts: (owner: string, records: ReadonlyArray<AttemptRecord>) => Effect.Effect<ReadonlyMap<string, string>>
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

    const lease = makeLease(sql)
    // The hot writes: one row at a time on SQLite, in one statement on PostgreSQL (see RowStatement.ts).
    const acceptChange = insertRows(sql, "event_changes", ["dedupe_key", "event_id", "received_at"], "ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key")
    const insertEvent = insertRows(sql, "events", ["id", "instance_id", "body", "change_count", "received_at"])
    const insertUnrouted = insertRows(sql, "unrouted_events", ["id", "phone_number_id", "waba_id", "field", "change_json", "received_at"])
    const insertDelivery = insertRows(sql, "deliveries", [
      "id",
      "webhook_id",
      "event_id",
      "message_id",
      "status",
      "attempts",
      "next_attempt_at",
      "lease_owner",
      "lease_expires_at",
      "created_at",
      "updated_at"
    ])
    const insertAttempt = insertRows(sql, "delivery_attempts", [
      "id",
      "delivery_id",
      "attempt",
      "started_at",
      "status_code",
      "latency_ms",
      "error",
      "response_snippet"
    ])
    // A success stands even if the webhook was disabled meanwhile: the receiver has the event.
    const markSucceededEach = rowStatement(sql, ["id", "owner", "attempts", "status_code", "at"], (p) =>
      sql`UPDATE deliveries SET status = 'succeeded', attempts = ${p("attempts")}, last_status_code = ${p("status_code")},
          last_error = NULL, next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ${p("at")}
        WHERE id = ${p("id")} AND lease_owner = ${p("owner")}`)
    const markFailedEach = rowStatement(sql, ["id", "owner", "status", "next_attempt_at", "attempts", "status_code", "error", "at"], (p) =>
      sql`UPDATE deliveries SET status = ${p("status")}, next_attempt_at = ${p("next_attempt_at")}, attempts = ${p("attempts")},
          last_status_code = ${p("status_code")}, last_error = ${p("error")}, lease_owner = NULL, lease_expires_at = NULL,
          updated_at = ${p("at")}
        WHERE id = ${p("id")} AND lease_owner = ${p("owner")} AND status IN ('pending', 'failed')`)
    // On PostgreSQL the same, every row in one statement (each statement is a round trip there).
    const markSucceededAll = (rows: ReadonlyArray<{ readonly id: string; readonly owner: string; readonly attempts: number; readonly status_code: number | null; readonly at: string }>) =>
      rows.length === 0 ? Effect.void : Effect.asVoid(sql`UPDATE deliveries AS d SET status = 'succeeded', attempts = r.attempts,
          last_status_code = r.status_code, last_error = NULL, next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
          updated_at = r.at
        FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(id text, owner text, attempts integer, status_code integer, at text)
        WHERE d.id = r.id AND d.lease_owner = r.owner`)
    const markFailedAll = (rows: ReadonlyArray<{ readonly id: string; readonly owner: string; readonly status: string; readonly next_attempt_at: string | null; readonly attempts: number; readonly status_code: number | null; readonly error: string | null; readonly at: string }>) =>
      rows.length === 0 ? Effect.void : Effect.asVoid(sql`UPDATE deliveries AS d SET status = r.status, next_attempt_at = r.next_attempt_at,
          attempts = r.attempts, last_status_code = r.status_code, last_error = r.error, lease_owner = NULL, lease_expires_at = NULL,
          updated_at = r.at
        FROM json_to_recordset(${JSON.stringify(rows)}::json)
          AS r(id text, owner text, status text, next_attempt_at text, attempts integer, status_code integer, error text, at text)
        WHERE d.id = r.id AND d.lease_owner = r.owner AND d.status IN ('pending', 'failed')`)
    const postgres = isPostgres(sql)
    const markSucceeded = postgres ? markSucceededAll : markSucceededEach
    const markFailed = postgres ? markFailedAll : markFailedEach

    return OutboxRepo.of({
      routes: (phoneNumberIds, wabaIds) =>
        sql<RouteRow>`SELECT id, organization_id, phone_number_id, waba_id FROM instances
          WHERE ${sql.in("phone_number_id", padded(phoneNumberIds))} OR ${sql.in("waba_id", padded(wabaIds))}`.pipe(Effect.orDie),
      acceptChanges: (changes, now) => {
        // A key given twice is kept for its first event: later ones are not written at all.
        const first = new Map<string, string>()
        for (const c of changes) if (!first.has(c.dedupeKey)) first.set(c.dedupeKey, c.eventId)
        // In key order: two replicas storing the same changes at once then meet on the first key they
        // share, and the later waits for the earlier's commit (then finds its keys taken) instead of
        // deadlocking with it.
        const ordered = [...first].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        return acceptChange(ordered.map(([dedupe_key, event_id]) => ({ dedupe_key, event_id, received_at: now }))).pipe(
          // A key stored before returns no row.
          Effect.map((stored) => {
            const fresh = new Set(stored.flatMap((row) => (typeof row === "object" && row !== null && "dedupe_key" in row ? [String(row.dedupe_key)] : [])))
            return new Map(ordered.filter(([key]) => fresh.has(key)))
          }),
          Effect.orDie
        )
      },
      insertEvents: (events, now) =>
        insertEvent(events.map((e) => ({ id: e.id, instance_id: e.instanceId, body: e.body, change_count: e.changeCount, received_at: now }))).pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      insertUnrouted: (changes, now) =>
        insertUnrouted(changes.map((c) => ({
          id: newId("unr"),
          phone_number_id: c.phoneNumberId,
          waba_id: c.wabaId,
          field: c.field,
          change_json: c.changeJson,
          received_at: now
        }))).pipe(Effect.asVoid, Effect.orDie),
      enqueue: (events, now, handover) =>
        Effect.gen(function*() {
          if (events.length === 0) return new Map<string, number>()
          const instanceIds = [...new Set(events.map((e) => e.instanceId))]
          const webhooks = yield* sql<QueueingWebhook>`
            SELECT id, instance_id, url, failing_since, secret_encrypted, previous_secret_encrypted, previous_secret_expires_at
              FROM webhooks
             WHERE ${sql.in("instance_id", padded(instanceIds))} AND active = 1 AND deleted_at IS NULL`
          const rows = events.flatMap((event) =>
            webhooks.filter((w) => w.instance_id === event.instanceId).map((webhook) => {
              const lease = handover !== undefined && handover.admit(webhook.id) ? handover : undefined
              const row = {
                id: newId("dlv"),
                webhook_id: webhook.id,
                event_id: event.id,
                message_id: newId("msg"),
                status: "pending",
                attempts: 0,
                next_attempt_at: now,
                lease_owner: lease?.owner ?? null,
                lease_expires_at: lease?.leaseUntil ?? null,
                created_at: now,
                updated_at: now
              }
              if (lease === undefined) return row
              lease.admitted.push({
                id: row.id,
                webhook_id: webhook.id,
                message_id: row.message_id,
                status: "pending",
                attempts: 0,
                final_attempt: null,
                next_attempt_at: now,
                body: event.body,
                url: webhook.url,
                webhook_active: true,
                webhook_failing_since: webhook.failing_since,
                secret_encrypted: webhook.secret_encrypted,
                previous_secret_encrypted: webhook.previous_secret_encrypted,
                previous_secret_expires_at: webhook.previous_secret_expires_at
              })
              return row
            })
          )
          yield* insertDelivery(rows)
          // Rows not handed to this process's dispatcher wait for a round: every replica's, on PostgreSQL.
          if (rows.some((row) => row.lease_owner === null)) yield* announce(sql, channels.outbox, "queued")
          const counts = new Map<string, number>()
          for (const row of rows) counts.set(row.event_id, (counts.get(row.event_id) ?? 0) + 1)
          return counts
        }).pipe(Effect.orDie),
      lease,
      cancel: (ids) =>
        sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
            updated_at = ${nowIso()}
          WHERE ${sql.in("id", padded(ids))} AND status IN ('pending', 'failed')`.pipe(Effect.asVoid, Effect.orDie),
      release: (owner, ids) =>
        (ids !== "all" && ids.length === 0
          ? Effect.void
          : Effect.zipRight(
            ids === "all"
              ? sql`UPDATE deliveries SET lease_owner = NULL, lease_expires_at = NULL
                  WHERE lease_owner = ${owner} AND status IN ('pending', 'failed') AND next_attempt_at IS NOT NULL`
              : sql`UPDATE deliveries SET lease_owner = NULL, lease_expires_at = NULL
                  WHERE lease_owner = ${owner} AND ${sql.in("id", padded(ids))}`,
            // Released rows are free at once: on PostgreSQL, the other replicas are told.
            announce(sql, channels.outbox, "released")
          )).pipe(Effect.orDie),
      recordAttempts: (owner, records) =>
        Effect.gen(function*() {
          if (records.length === 0) return new Map<string, string>()
          yield* insertAttempt(records.map((record) => ({
            id: newId("att"),
            delivery_id: record.delivery.id,
            attempt: record.attempt,
            started_at: record.startedAt,
            status_code: record.statusCode,
            latency_ms: record.latencyMs,
            error: record.error,
            response_snippet: record.responseSnippet
          })))
          const succeeded = records.filter((r) => r.result._tag === "Succeeded")
          yield* markSucceeded(succeeded.map((r) => ({ id: r.delivery.id, owner, attempts: r.attempt, status_code: r.statusCode, at: r.finishedAt })))
          // Only webhooks seen failing when their rows were leased: most rounds need no statement here.
          const recovered = [...new Set(succeeded.flatMap((r) => (r.delivery.webhook_failing_since === null ? [] : [r.delivery.webhook_id])))]
          if (recovered.length > 0) {
            yield* sql`UPDATE webhooks SET failing_since = NULL WHERE ${sql.in("id", padded(recovered))} AND failing_since IS NOT NULL`
          }

          const failed = records.filter((r) => r.result._tag !== "Succeeded")
          yield* markFailed(failed.map((r) => ({
            id: r.delivery.id,
            owner,
            status: r.result._tag === "RetryAt" ? "failed" : "dead",
            next_attempt_at: r.result._tag === "RetryAt" ? r.result.at : null,
            attempts: r.attempt,
            status_code: r.statusCode,
            error: r.error,
            at: r.finishedAt
          })))
          const failing = new Map<string, string>()
          for (const record of failed) {
            if (failing.has(record.delivery.webhook_id)) continue
            const rows = yield* sql<{ readonly failing_since: string }>`UPDATE webhooks
              SET failing_since = COALESCE(failing_since, ${record.finishedAt}) WHERE id = ${record.delivery.webhook_id}
              RETURNING failing_since`
            const since = rows[0]?.failing_since
            if (since !== undefined) failing.set(record.delivery.webhook_id, since)
          }
          return failing
        }).pipe(Effect.orDie),
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
          yield* announce(sql, channels.outbox, "replayed")
          return "requeued"
        }).pipe(sql.withTransaction, Effect.orDie)
    })
  })
)

/**
 * SQL for the events outbox: accepted changes (deduplicated by key), the envelope each instance
 * receives, one delivery row per active webhook taking any of its changes, leases taken by
 * dispatchers, and the attempt log. Leases are plain column updates (owner + expiry), so a crashed
 * hub's rows are taken again once their lease has expired, by whichever process looks next.
 * A webhook with an event filter that takes only some of an event's changes gets a body of its own
 * on its delivery row; every other delivery reads its event's (unfiltered webhooks cost nothing
 * more). Each dispatcher round adds its outcomes to one count per webhook, outcome and hour (the
 * webhooks' health), whatever the number of attempts.
 */
import { LRUCache } from "lru-cache"
import { SqlClient, type Statement } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { newId, nowIso } from "../Domain/Ids.js"
import { isPostgres } from "../Sql/Dialect.js"
import { announce, channels } from "../Sql/Notify.js"
import { insertRows, rowStatement } from "../Sql/RowStatement.js"
import { padded, powerOfTwoChunks } from "../Sql/StatementShapes.js"
import { kindsOf, parseFilter, selectChanges } from "./EventKinds.js"
import { deliveryColumns, type LogFilter, logPage, type LogPage } from "./DeliveryLog.js"
import { type LeaseRequest, makeLease } from "./Lease.js"
import type {
  AcceptedChange,
  AttemptRecord,
  AttemptRow,
  DeliveryHealth,
  DeliveryRow,
  DeliveryStatus,
  EventRecord,
  Handover,
  LeasedDelivery,
  RecoverOutcome,
  ReplayOutcome,
  RouteRow,
  UnroutedChange
} from "./Records.js"

export type {
  AcceptedChange,
  AttemptRecord,
  AttemptResult,
  AttemptRow,
  DeliveryHealth,
  DeliveryRow,
  DeliveryStatus,
  EventRecord,
  FilterableEvent,
  Handover,
  LeasedDelivery,
  RecoverOutcome,
  ReplayOutcome,
  RouteRow,
  UnroutedChange
} from "./Records.js"

/** An active webhook new deliveries are queued for, with what it takes to send one at once. */
interface QueueingWebhook {
  readonly id: string
  readonly organization_id: string
  readonly instance_id: string
  readonly url: string
  readonly failing_since: string | null
  readonly secret_encrypted: string
  readonly previous_secret_encrypted: string | null
  readonly previous_secret_expires_at: string | null
  /** Its event filter: NULL for every kind (see Webhooks/EventKinds.ts). */
  readonly events: string | null
  readonly headers: string | null
  readonly headers_encrypted: string | null
}

const queueingColumns =
  "id, organization_id, instance_id, url, failing_since, secret_encrypted, previous_secret_encrypted, previous_secret_expires_at, events, headers, headers_encrypted"

/** Why the hub turned a webhook off: a 410 answer, failures without a success for too long, or its owner. */
export type DisabledReason = "gone_410" | "failing_too_long" | "manual"

/** Most queued rows of each status the health of a webhook counts. */
export const QUEUED_CAP = 1_000

/** The hour bucket of a time: `2026-11-23T20`. */
export const hourOf = (iso: string) => iso.slice(0, 13)

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
   * One pending delivery of `event` to this webhook alone, whatever kinds it takes (a test event),
   * with the given id; false when the webhook is not active.
   */
  readonly enqueueTo: (webhookId: string, event: EventRecord, deliveryId: string, now: string, handover?: Handover) => Effect.Effect<boolean>
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
  /** A page of the delivery log of some webhooks, newest first (see DeliveryLog.ts). */
  readonly list: (filter: LogFilter) => Effect.Effect<LogPage>
  readonly find: (webhookId: string, id: string) => Effect.Effect<DeliveryRow | undefined>
  readonly findAttempts: (id: string) => Effect.Effect<ReadonlyArray<AttemptRow>>
  /** Deactivates a webhook with the reason shown to its owner (410, days of failures), cancelling its queued deliveries. */
  /** Turns an active webhook off and cancels its queued deliveries; false when it was not active. */
  readonly disableWebhook: (id: string, reason: DisabledReason) => Effect.Effect<boolean>
  /**
   * Sends a delivery again: a finished one gets one more attempt with the same webhook-id; a retry
   * waiting is due now. Either way it is pending again, due from its creation.
   */
  readonly replay: (webhookId: string, id: string, now: string) => Effect.Effect<ReplayOutcome>
  /**
   * Queues again the webhook's failed and dead deliveries created in [since, until), oldest first,
   * at most `max` (as `replay` does each; failed ones in flight are left alone). A repeat finds
   * only what failed again meanwhile. Written in small transactions, so the hub's one connection
   * is never held long.
   */
  readonly recover: (webhookId: string, window: { readonly since: string; readonly until: string }, now: string, max: number) => Effect.Effect<RecoverOutcome>
  /**
   * Each webhook's deliveries by outcome in the hourly buckets from `sinceHour` on (counted by the
   * dispatcher's rounds), its last success, and its queued rows (each status counted up to QUEUED_CAP).
   */
  readonly health: (webhookIds: ReadonlyArray<string>, sinceHour: string) => Effect.Effect<ReadonlyMap<string, DeliveryHealth>>
}>() {}

export const OutboxRepoLive = Layer.effect(
  OutboxRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    const lease = makeLease(sql)
    // The hot writes, one row at a time (see RowStatement.ts).
    const acceptChange = insertRows(sql, "event_changes", ["dedupe_key", "event_id", "received_at"], "ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key")
    const insertEvent = insertRows(sql, "events", ["id", "instance_id", "body", "change_count", "received_at"])
    const insertUnrouted = insertRows(sql, "unrouted_events", ["id", "phone_number_id", "waba_id", "field", "change_json", "received_at", "reason"])
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
      "updated_at",
      "body"
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
    // One row per webhook, outcome and hour; a round adds its counts to it.
    const countDeliveries = rowStatement(sql, ["webhook_id", "outcome", "hour", "deliveries", "last_at"], (p) =>
      sql`INSERT INTO webhook_delivery_hours (webhook_id, outcome, hour, deliveries, last_at)
        VALUES (${p("webhook_id")}, ${p("outcome")}, ${p("hour")}, ${p("deliveries")}, ${p("last_at")})
        ON CONFLICT (webhook_id, outcome, hour) DO UPDATE SET
          deliveries = webhook_delivery_hours.deliveries + excluded.deliveries,
          last_at = CASE WHEN excluded.last_at > webhook_delivery_hours.last_at THEN excluded.last_at ELSE webhook_delivery_hours.last_at END`)

    /**
     * Queues rows again (replay, recover): pending, so due from their creation (the list of pending
     * rows relies on it). A retry waiting for its time goes on with its schedule; a finished
     * delivery gets one more attempt, with the same webhook-id.
     */
    const requeue = (where: Statement.Fragment, now: string) =>
      sql<{ readonly id: string }>`UPDATE deliveries SET status = 'pending', next_attempt_at = created_at,
          final_attempt = CASE WHEN status = 'failed' THEN final_attempt ELSE attempts + 1 END,
          lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now}
        WHERE ${where} RETURNING id`.pipe(
        // Queued again: on PostgreSQL every replica's dispatcher is told.
        Effect.tap((rows) => (rows.length === 0 ? Effect.void : announce(sql, channels.outbox, "replayed")))
      )

    /** Parsed event filters, by their stored text (a handful of distinct ones). */
    const filters = new LRUCache<string, ReadonlySet<string>>({ max: 1_000 })
    const filterOf = (stored: string) => {
      const known = filters.get(stored)
      if (known !== undefined) return known
      const parsed: ReadonlySet<string> = new Set(parseFilter(stored) ?? [])
      filters.set(stored, parsed)
      return parsed
    }

    /**
     * For each event, the body a filtered webhook takes of it: null for the whole event (as every
     * unfiltered webhook), undefined for none of it. Kinds are worked out only for events some
     * filtered webhook may take, once per event; bodies once per event and filter.
     */
    const selector = (event: EventRecord) => {
      let kinds: ReadonlyArray<ReadonlyArray<string>> | undefined
      let bodies: Map<string, string | null | undefined> | undefined
      return (filter: string | null): string | null | undefined => {
        const parts = event.filterable
        if (filter === null || parts === undefined) return null
        bodies ??= new Map()
        if (bodies.has(filter)) return bodies.get(filter)
        kinds ??= parts.changes.map((change) => kindsOf(change.field, change.value))
        const taken = selectChanges(filterOf(filter), kinds)
        const body = taken === "all" ? null : taken === "none" ? undefined : parts.bodyOf(taken)
        bodies.set(filter, body)
        return body
      }
    }

    /** A new delivery row of `event` to `webhook`, written leased to the hand-off's owner if it admits it. */
    const deliveryRow = (webhook: QueueingWebhook, event: EventRecord, body: string | null, now: string, handover: Handover | undefined, id = newId("dlv")) => {
      const lease = handover !== undefined && handover.admit(webhook.id, webhook.organization_id) ? handover : undefined
      const row = {
        id,
        webhook_id: webhook.id,
        event_id: event.id,
        message_id: newId("msg"),
        status: "pending",
        attempts: 0,
        // A pending row is due from its creation (the list of pending rows relies on it).
        next_attempt_at: now,
        lease_owner: lease?.owner ?? null,
        lease_expires_at: lease?.leaseUntil ?? null,
        created_at: now,
        updated_at: now,
        body
      }
      lease?.admitted.push({
        id: row.id,
        webhook_id: webhook.id,
        organization_id: webhook.organization_id,
        message_id: row.message_id,
        status: "pending",
        attempts: 0,
        final_attempt: null,
        next_attempt_at: now,
        body: body ?? event.body,
        url: webhook.url,
        webhook_active: true,
        webhook_failing_since: webhook.failing_since,
        secret_encrypted: webhook.secret_encrypted,
        previous_secret_encrypted: webhook.previous_secret_encrypted,
        previous_secret_expires_at: webhook.previous_secret_expires_at,
        headers: webhook.headers,
        headers_encrypted: webhook.headers_encrypted
      })
      return row
    }

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
          received_at: now,
          reason: c.reason ?? null
        }))).pipe(Effect.asVoid, Effect.orDie),
      enqueue: (events, now, handover) =>
        Effect.gen(function*() {
          if (events.length === 0) return new Map<string, number>()
          const instanceIds = [...new Set(events.map((e) => e.instanceId))]
          const webhooks = yield* sql<QueueingWebhook>`
            SELECT ${sql.literal(queueingColumns)} FROM webhooks
             WHERE ${sql.in("instance_id", padded(instanceIds))} AND active = 1 AND deleted_at IS NULL`
          const rows = events.flatMap((event) => {
            const bodyFor = selector(event)
            return webhooks.flatMap((webhook) => {
              if (webhook.instance_id !== event.instanceId) return []
              const body = bodyFor(webhook.events)
              // An event with no change the webhook takes makes no delivery for it.
              return body === undefined ? [] : [deliveryRow(webhook, event, body, now, handover)]
            })
          })
          yield* insertDelivery(rows)
          // Rows not handed to this process's dispatcher wait for a round: every replica's, on PostgreSQL.
          if (rows.some((row) => row.lease_owner === null)) yield* announce(sql, channels.outbox, "queued")
          const counts = new Map<string, number>()
          for (const row of rows) counts.set(row.event_id, (counts.get(row.event_id) ?? 0) + 1)
          return counts
        }).pipe(Effect.orDie),
      enqueueTo: (webhookId, event, deliveryId, now, handover) =>
        Effect.gen(function*() {
          const [webhook] = yield* sql<QueueingWebhook>`SELECT ${sql.literal(queueingColumns)} FROM webhooks
            WHERE id = ${webhookId} AND active = 1 AND deleted_at IS NULL`
          if (webhook === undefined) return false
          const row = deliveryRow(webhook, event, null, now, handover, deliveryId)
          yield* insertDelivery([row])
          if (row.lease_owner === null) yield* announce(sql, channels.outbox, "queued")
          return true
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
          // The webhooks' health: one row per webhook, outcome and hour, whatever the number of attempts.
          const counts = new Map<string, { webhook_id: string; outcome: string; hour: string; deliveries: number; last_at: string }>()
          for (const record of records) {
            const outcome = record.result._tag === "Succeeded" ? "succeeded" : record.result._tag === "RetryAt" ? "failed" : "dead"
            const key = `${record.delivery.webhook_id} ${outcome} ${hourOf(record.finishedAt)}`
            const count = counts.get(key)
            if (count === undefined) {
              counts.set(key, { webhook_id: record.delivery.webhook_id, outcome, hour: hourOf(record.finishedAt), deliveries: 1, last_at: record.finishedAt })
            } else {
              count.deliveries++
              if (record.finishedAt > count.last_at) count.last_at = record.finishedAt
            }
          }
          yield* countDeliveries([...counts.values()])

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
      list: (filter) => logPage(sql, filter),
      find: (webhookId, id) =>
        sql<DeliveryRow>`SELECT ${sql.literal(deliveryColumns)} FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`.pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        ),
      findAttempts: (id) =>
        sql<AttemptRow>`SELECT delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
          FROM delivery_attempts WHERE delivery_id = ${id} ORDER BY attempt, started_at`.pipe(Effect.orDie),
      disableWebhook: (id, reason) =>
        Effect.gen(function*() {
          const now = nowIso()
          const disabled = yield* sql`UPDATE webhooks SET active = 0, disabled_reason = ${reason}, updated_at = ${now}
            WHERE id = ${id} AND active = 1 RETURNING id`
          yield* sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, updated_at = ${now}
            WHERE webhook_id = ${id} AND status IN ('pending', 'failed')`
          return disabled.length > 0
        }).pipe(sql.withTransaction, Effect.orDie),
      replay: (webhookId, id, now) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ readonly status: DeliveryStatus; readonly lease_expires_at: string | null }>`
            SELECT status, lease_expires_at FROM deliveries WHERE id = ${id} AND webhook_id = ${webhookId}`
          const row = rows[0]
          if (row === undefined) return "not_found"
          const leased = row.lease_expires_at !== null && row.lease_expires_at >= now
          if (row.status === "pending" || (row.status === "failed" && leased)) return "already_queued"
          yield* requeue(sql`id = ${id}`, now)
          return "requeued"
        }).pipe(sql.withTransaction, Effect.orDie),
      recover: (webhookId, window, now, max) =>
        Effect.gen(function*() {
          const inWindow = sql`created_at BETWEEN ${window.since} AND ${window.until} AND created_at < ${window.until}`
          // Oldest first, merged from the two statuses' ranges of deliveries_webhook_failures.
          const candidates = yield* sql<{ readonly id: string; readonly created_at: string }>`
            SELECT id, created_at FROM deliveries
             WHERE webhook_id = ${webhookId} AND status = 'dead' AND status IN ('failed', 'dead', 'cancelled') AND ${inWindow}
            UNION ALL
            SELECT id, created_at FROM deliveries
             WHERE webhook_id = ${webhookId} AND status = 'failed' AND status IN ('failed', 'dead', 'cancelled') AND ${inWindow}
               AND (lease_expires_at IS NULL OR lease_expires_at < ${now})
            ORDER BY created_at, id LIMIT ${max + 1}`
          let requeued = 0
          for (const chunk of powerOfTwoChunks(candidates.slice(0, max).map((c) => c.id))) {
            const updated = yield* requeue(
              sql`${sql.in("id", chunk)} AND webhook_id = ${webhookId}
                AND (status = 'dead' OR (status = 'failed' AND (lease_expires_at IS NULL OR lease_expires_at < ${now})))`,
              now
            ).pipe(sql.withTransaction)
            requeued += updated.length
          }
          return { requeued, more: candidates.length > max }
        }).pipe(Effect.orDie),
      health: (webhookIds, sinceHour) =>
        Effect.gen(function*() {
          const health = new Map<string, DeliveryHealth>()
          for (const webhookId of webhookIds) {
            const outcome = (name: string) =>
              sql`(SELECT COALESCE(SUM(deliveries), 0) FROM webhook_delivery_hours
                WHERE webhook_id = ${webhookId} AND outcome = ${name} AND hour >= ${sinceHour})`
            const queued = (status: string) =>
              sql`(SELECT COUNT(*) FROM (SELECT 1 AS one FROM deliveries
                WHERE webhook_id = ${webhookId} AND status = ${status} AND next_attempt_at IS NOT NULL LIMIT ${QUEUED_CAP + 1}) AS queued)`
            const [row] = yield* sql<{
              readonly succeeded: number
              readonly failed: number
              readonly dead: number
              readonly last_success_at: string | null
              readonly pending: number
              readonly retrying: number
            }>`SELECT ${outcome("succeeded")} AS succeeded, ${outcome("failed")} AS failed, ${outcome("dead")} AS dead,
                (SELECT last_at FROM webhook_delivery_hours WHERE webhook_id = ${webhookId} AND outcome = 'succeeded'
                  ORDER BY hour DESC LIMIT 1) AS last_success_at,
                ${queued("pending")} AS pending, ${queued("failed")} AS retrying`
            const pending = Number(row?.pending ?? 0)
            const retrying = Number(row?.retrying ?? 0)
            health.set(webhookId, {
              succeeded: Number(row?.succeeded ?? 0),
              failed: Number(row?.failed ?? 0),
              dead: Number(row?.dead ?? 0),
              lastSuccessAt: row?.last_success_at ?? null,
              pending: Math.min(pending, QUEUED_CAP),
              retrying: Math.min(retrying, QUEUED_CAP),
              queuedCapped: pending > QUEUED_CAP || retrying > QUEUED_CAP
            })
          }
          return health
        }).pipe(Effect.orDie)
    })
  })
)

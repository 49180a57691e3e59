/**
 * The engine's SQL over the events outbox: accepted changes (deduplicated by key), the envelope each
 * instance receives, the webhooks new deliveries are queued for and the rows written for them
 * (Enqueue.ts decides which), leases taken by dispatchers (Lease.ts), and the attempt log
 * (AttemptLog.ts). Leases are plain column updates (owner + expiry), so a crashed hub's rows are
 * taken again once their lease has expired, by whichever process looks next.
 * What the endpoints read of deliveries, and turning a webhook off, are src/Webhooks/'s.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newId, nowIso } from "../Domain/Ids.js"
import { isPostgres } from "../Sql/Dialect.js"
import { announce, channels } from "../Sql/Notify.js"
import { insertRows, jsonRowsInsert } from "../Sql/RowStatement.js"
import { padded } from "../Sql/StatementShapes.js"
import { makeRecordAttempts, type RecordedAttempts } from "./AttemptLog.js"
import { type Lane, makeLanes } from "./Lanes.js"
import { type LeaseRequest, makeLease } from "./Lease.js"
import type {
  AcceptedChange,
  AttemptRecord,
  EventRecord,
  LeasedDelivery,
  NewDeliveryRow,
  QueueingWebhook,
  RouteRow,
  UnroutedChange
} from "./Records.js"

const queueingColumns =
  "id, organization_id, instance_id, url, failing_since, secret_encrypted, previous_secret_encrypted, previous_secret_expires_at, events, headers, headers_encrypted, ordering"

/** A webhook deliveries are queued to: active and pushed to (a poll webhook never is); `alias` names its table. */
const queueingCondition = (alias = "") => `${alias}active = 1 AND ${alias}deleted_at IS NULL AND ${alias}kind = 'push'`

interface OutboxRepoShape {
  /**
   * The instances bound to any of these phone number ids or business accounts, and their active
   * webhooks (as `queueingWebhooks` reads them), in one query: the ingress's group needs both.
   */
  readonly routes: (
    phoneNumberIds: ReadonlyArray<string>,
    wabaIds: ReadonlyArray<string>
  ) => Effect.Effect<Routes>
  /**
   * Records change keys; returns the new keys with the event that holds each (a key seen before is a
   * duplicate; a key given twice is kept for its first event).
   */
  readonly acceptChanges: (
    changes: ReadonlyArray<AcceptedChange>,
    now: string
  ) => Effect.Effect<ReadonlyMap<string, string>>
  readonly insertEvents: (events: ReadonlyArray<EventRecord>, now: string) => Effect.Effect<void>
  readonly insertUnrouted: (changes: ReadonlyArray<UnroutedChange>, now: string) => Effect.Effect<void>
  /** The active webhooks of these instances, with what it takes to queue a delivery to each and send it at once. */
  readonly queueingWebhooks: (instanceIds: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<QueueingWebhook>>
  /** The same of one webhook; undefined when it is not active. */
  readonly queueingWebhook: (id: string) => Effect.Effect<QueueingWebhook | undefined>
  /**
   * Writes new delivery rows (Enqueue.ts builds them), and with `events` their events' rows first
   * (on PostgreSQL all in one statement). Rows not written leased to this process's dispatcher wait
   * for a round: every replica's dispatcher is told, on PostgreSQL.
   */
  readonly insertDeliveries: (
    rows: ReadonlyArray<NewDeliveryRow>,
    events?: { readonly events: ReadonlyArray<EventRecord>; readonly now: string }
  ) => Effect.Effect<void>
  /**
   * Leases due deliveries, first attempts before retries, at most `limit` in all, each webhook and
   * each organization within its share of attempts in flight (Fairness.ts).
   */
  readonly lease: (input: LeaseRequest) => Effect.Effect<ReadonlyArray<LeasedDelivery>>
  /**
   * Locks these per-person lanes and reads where each ends (Lanes.ts): the last place taken by a
   * delivery not yet finished, by lane name; an empty lane is absent.
   */
  readonly laneTails: (lanes: ReadonlyArray<Lane>) => Effect.Effect<ReadonlyMap<string, number>>
  /** Cancels leased rows whose webhook is no longer active. */
  readonly cancel: (ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Gives leased rows back so they are taken at once (by this or another process). */
  readonly release: (owner: string, ids: ReadonlyArray<string> | "all") => Effect.Effect<void>
  /**
   * Logs attempts and moves their deliveries on, the next of each person's lane made due after one
   * ended (run it in a transaction; see AttemptLog.ts).
   */
  readonly recordAttempts: (
    owner: string,
    records: ReadonlyArray<AttemptRecord>
  ) => Effect.Effect<RecordedAttempts>
}

/**
 * Records change keys in key order, each kept for the first event naming it; answers the new keys
 * with their events (see OutboxRepoShape.acceptChanges).
 */
const makeAcceptChanges = (sql: SqlClient.SqlClient) => {
  // The hot write, one row at a time (see RowStatement.ts).
  const acceptChange = insertRows(
    sql,
    "event_changes",
    ["dedupe_key", "event_id", "received_at"],
    "ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key"
  )
  return (changes: ReadonlyArray<AcceptedChange>, now: string): Effect.Effect<ReadonlyMap<string, string>> => {
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
        const fresh = new Set(
          stored.flatMap((
            row
          ) => (typeof row === "object" && row !== null && "dedupe_key" in row ? [String(row.dedupe_key)] : []))
        )
        return new Map(ordered.filter(([key]) => fresh.has(key)))
      }),
      Effect.orDie
    )
  }
}

const EVENT_COLUMNS = ["id", "instance_id", "body", "change_count", "received_at", "traceparent"] as const

/** An event's row. */
const eventRows = (events: ReadonlyArray<EventRecord>, now: string) =>
  events.map((e) => ({
    id: e.id,
    instance_id: e.instanceId,
    body: e.body,
    change_count: e.changeCount,
    received_at: now,
    traceparent: e.traceparent ?? null
  }))

/** Writes the events new changes are delivered in. */
const makeInsertEvents = (sql: SqlClient.SqlClient) => {
  // The hot write, one row at a time (see RowStatement.ts).
  const insertEvent = insertRows(sql, "events", EVENT_COLUMNS)
  return (events: ReadonlyArray<EventRecord>, now: string): Effect.Effect<void> =>
    insertEvent(eventRows(events, now)).pipe(Effect.asVoid, Effect.orDie)
}

/** Keeps aside changes no instance takes (and stale replays). */
const makeInsertUnrouted = (sql: SqlClient.SqlClient) => {
  const insertUnrouted = insertRows(sql, "unrouted_events", [
    "id",
    "phone_number_id",
    "waba_id",
    "field",
    "change_json",
    "received_at",
    "reason"
  ])
  return (changes: ReadonlyArray<UnroutedChange>, now: string): Effect.Effect<void> =>
    insertUnrouted(changes.map((c) => ({
      id: newId("unr"),
      phone_number_id: c.phoneNumberId,
      waba_id: c.wabaId,
      field: c.field,
      change_json: c.changeJson,
      received_at: now,
      reason: c.reason ?? null
    }))).pipe(Effect.asVoid, Effect.orDie)
}

const DELIVERY_COLUMNS = [
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
  "body",
  "contact_key",
  "contact_seq"
] as const

/**
 * Writes new delivery rows, and the events given with them; queued rows (not leased to this process)
 * wake every replica's dispatcher. On PostgreSQL events, deliveries and the word to the replicas are
 * one statement (one round trip on the ingress group's path): the foreign keys of `deliveries` are
 * checked at the statement's end, where its events are in.
 */
const makeInsertDeliveries = (
  sql: SqlClient.SqlClient,
  insertEvents: (events: ReadonlyArray<EventRecord>, now: string) => Effect.Effect<void>
) => {
  // The hot writes, one row at a time on SQLite (see RowStatement.ts).
  const insertDelivery = insertRows(sql, "deliveries", DELIVERY_COLUMNS)
  return (
    rows: ReadonlyArray<NewDeliveryRow>,
    events?: { readonly events: ReadonlyArray<EventRecord>; readonly now: string }
  ): Effect.Effect<void> =>
    Effect.gen(function*() {
      const queued = rows.some((row) => row.lease_owner === null)
      if (isPostgres(sql) && events !== undefined && events.events.length > 0 && rows.length > 0) {
        return yield* sql`WITH e AS (${
          jsonRowsInsert(sql, "events", EVENT_COLUMNS, eventRows(events.events, events.now))
        }), d AS (${jsonRowsInsert(sql, "deliveries", DELIVERY_COLUMNS, rows)})
          SELECT ${queued ? sql`pg_notify(${channels.outbox}, 'queued')` : sql.literal("1")}`
      }
      if (events !== undefined) yield* insertEvents(events.events, events.now)
      yield* insertDelivery(rows)
      if (queued) yield* announce(sql, channels.outbox, "queued")
    }).pipe(Effect.asVoid, Effect.orDie)
}

/** The instances and webhooks an ingress group routes to (OutboxRepoShape.routes). */
interface Routes {
  readonly routes: ReadonlyArray<RouteRow>
  readonly webhooks: ReadonlyArray<QueueingWebhook>
}

/** A route's row joined to one of its instance's webhooks (`w_` columns, NULL for an instance without any). */
type RouteWebhookRow = RouteRow & { readonly [K in keyof QueueingWebhook as `w_${K}`]: QueueingWebhook[K] | null }

/**
 * The instances bound to any of these phone number ids or business accounts, each joined to its active
 * push webhooks. Hand-typed, not decoded with a Schema: read in every ingress group's write (speed).
 */
const selectRoutes = (
  sql: SqlClient.SqlClient,
  phoneNumberIds: ReadonlyArray<string>,
  wabaIds: ReadonlyArray<string>
) =>
  sql<RouteWebhookRow>`SELECT i.id, i.organization_id, i.phone_number_id, i.waba_id, ${
    sql.literal(queueingColumns.split(", ").map((column) => `w.${column} AS w_${column}`).join(", "))
  }
    FROM (SELECT id, organization_id, phone_number_id, waba_id FROM instances
      WHERE ${sql.in("phone_number_id", padded(phoneNumberIds))} OR ${sql.in("waba_id", padded(wabaIds))}) AS i
    LEFT JOIN webhooks w ON w.instance_id = i.id AND ${sql.literal(queueingCondition("w."))}`.pipe(
    Effect.map((rows): Routes => {
      const routes = new Map<string, RouteRow>()
      const webhooks: Array<QueueingWebhook> = []
      for (const row of rows) {
        routes.set(row.id, {
          id: row.id,
          organization_id: row.organization_id,
          phone_number_id: row.phone_number_id,
          waba_id: row.waba_id
        })
        if (row.w_id !== null) webhooks.push(webhookOf(row, row.w_id))
      }
      return { routes: [...routes.values()], webhooks }
    }),
    Effect.orDie
  )

/**
 * The webhook of a route's row that has one (`w_id` not NULL): its NOT NULL columns are then all
 * there, and the fallbacks only satisfy the row's type, which the LEFT JOIN makes nullable.
 */
const webhookOf = (row: RouteWebhookRow, id: string): QueueingWebhook => ({
  id,
  organization_id: row.w_organization_id ?? row.organization_id,
  instance_id: row.w_instance_id ?? row.id,
  url: row.w_url ?? "",
  failing_since: row.w_failing_since,
  secret_encrypted: row.w_secret_encrypted ?? "",
  previous_secret_encrypted: row.w_previous_secret_encrypted,
  previous_secret_expires_at: row.w_previous_secret_expires_at,
  events: row.w_events,
  headers: row.w_headers,
  headers_encrypted: row.w_headers_encrypted,
  ordering: row.w_ordering ?? "none"
})

/** Hand-typed, not decoded with a Schema: read in every ingress group's write (speed). A poll webhook is never pushed to. */
const selectQueueingWebhooks = (sql: SqlClient.SqlClient, instanceIds: ReadonlyArray<string>) =>
  sql<QueueingWebhook>`
    SELECT ${sql.literal(queueingColumns)} FROM webhooks
     WHERE ${sql.in("instance_id", padded(instanceIds))} AND ${sql.literal(queueingCondition())}`.pipe(
    Effect.orDie
  )

const selectQueueingWebhook = (sql: SqlClient.SqlClient, id: string) =>
  sql<QueueingWebhook>`SELECT ${sql.literal(queueingColumns)} FROM webhooks
    WHERE id = ${id} AND ${sql.literal(queueingCondition())}`.pipe(
    Effect.map((rows) => rows[0]),
    Effect.orDie
  )

const cancelDeliveries = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>) =>
  sql`UPDATE deliveries SET status = 'cancelled', next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL,
      updated_at = ${nowIso()}
    WHERE ${sql.in("id", padded(ids))} AND status IN ('pending', 'failed')`.pipe(Effect.asVoid, Effect.orDie)

const releaseLeases = (sql: SqlClient.SqlClient, owner: string, ids: ReadonlyArray<string> | "all") =>
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
    )).pipe(Effect.orDie)

/** The engine's SQL over the outbox (see the header). */
export class OutboxRepo extends Effect.Service<OutboxRepo>()("OutboxRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const lanes = makeLanes(sql)
    const insertEvents = makeInsertEvents(sql)
    const service: OutboxRepoShape = {
      routes: (phoneNumberIds, wabaIds) => selectRoutes(sql, phoneNumberIds, wabaIds),
      acceptChanges: makeAcceptChanges(sql),
      insertEvents,
      insertUnrouted: makeInsertUnrouted(sql),
      queueingWebhooks: (instanceIds) => selectQueueingWebhooks(sql, instanceIds),
      queueingWebhook: (id) => selectQueueingWebhook(sql, id),
      insertDeliveries: makeInsertDeliveries(sql, insertEvents),
      lease: makeLease(sql),
      laneTails: (lanesOf) => Effect.orDie(lanes.tails(lanesOf)),
      cancel: (ids) => cancelDeliveries(sql, ids),
      release: (owner, ids) => releaseLeases(sql, owner, ids),
      recordAttempts: makeRecordAttempts(sql, lanes.advance)
    }
    return service
  })
}) {}

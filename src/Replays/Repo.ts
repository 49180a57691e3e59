/**
 * SQL of replays (this folder owns webhook_replays and webhook_replay_keys, and the replay_id of the
 * deliveries it queues): the events of an instance in a window, in (received_at, id) order; an
 * event's earlier delivery to a webhook; new replayed deliveries and earlier ones queued again; and a
 * replay's record with its deliveries counted by status.
 *
 * A replayed delivery waits in the dispatcher's retry lane: status `failed`, due now. The lease takes
 * first attempts (`pending`) before retries (Delivery/Lease.ts), so the live traffic's first attempts
 * never wait behind a replay's rows, however many it queued; the lease itself is unchanged.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { encodeCursor, type Keyset } from "../Domain/Paging.js"
import { lockRead } from "../Sql/Dialect.js"
import { announce, channels } from "../Sql/Notify.js"
import { decodeRows, SqlCount } from "../Sql/RowSchemas.js"
import { padded } from "../Sql/StatementShapes.js"
import { type StoredEvent, storedEventsAfter, type StoredEventsRequest } from "../UpstreamEvents/Stored.js"

/** An event's earlier delivery to the webhook. */
export interface EarlierDelivery {
  readonly id: string
  readonly event_id: string
  readonly status: string
}

/** What a chunk of a replay queues: new deliveries, earlier finished ones again (by id), and how many were queued already. */
export interface ChunkPlan {
  readonly fresh: ReadonlyArray<ReplayedRow>
  readonly again: ReadonlyArray<string>
  readonly alreadyQueued: number
}

/** A replayed delivery of an event that had none to the webhook. */
export interface ReplayedRow {
  readonly id: string
  readonly message_id: string
  readonly event_id: string
  /** Its own body, when the webhook takes only some of the event's changes; null for the event's. */
  readonly body: string | null
}

const ReplayStored = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  since: Schema.String,
  until: Schema.String,
  events: Schema.NullOr(Schema.String),
  events_queued: SqlCount,
  already_queued: SqlCount,
  next_cursor: Schema.NullOr(Schema.String),
  finished_at: Schema.NullOr(Schema.String),
  created_at: Schema.String
})
export type ReplayStored = typeof ReplayStored.Type
const replayRows = decodeRows(ReplayStored)

const statusCounts = decodeRows(Schema.Struct({ status: Schema.String, n: SqlCount }))

/** Statuses already finished: a replay queues their deliveries again; queued ones it leaves be. */
export const FINISHED = ["succeeded", "dead", "cancelled"] as const

export class ReplaysRepo extends Effect.Service<ReplaysRepo>()("ReplaysRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient

    /**
     * The earlier deliveries of these events (oldest first, one chunk) to the webhook: a live one was
     * created at its event's received_at (deliveries_webhook), one a replay made is found through
     * deliveries_replayed_event.
     */
    const earlier = (webhookId: string, events: ReadonlyArray<StoredEvent>) => {
      const first = events[0]
      const last = events[events.length - 1]
      if (first === undefined || last === undefined) return Effect.succeed([])
      const ids = padded(events.map((e) => e.id))
      return sql<EarlierDelivery>`SELECT id, event_id, status FROM deliveries
          WHERE webhook_id = ${webhookId} AND created_at >= ${first.received_at} AND created_at <= ${last.received_at}
            AND ${sql.in("event_id", ids)}
        UNION
        SELECT id, event_id, status FROM deliveries
          WHERE webhook_id = ${webhookId} AND replay_id IS NOT NULL AND ${sql.in("event_id", ids)}`.pipe(
        Effect.orDie
      )
    }

    /**
     * Writes one chunk of a replay, in one transaction: the events' earlier deliveries read, `plan`
     * deciding what to queue, new deliveries in the retry lane, and earlier finished ones queued
     * again there with their webhook-id (one more attempt, as a retry of one delivery gives); the
     * replay's record moved on to `position`. Every replica's dispatcher is told (PostgreSQL). Two
     * replays of one webhook at once take turns on its row (PostgreSQL; SQLite's transactions take
     * turns anyway), so the later one finds the deliveries the earlier made and never makes a second.
     */
    const queueChunk = (input: {
      readonly replayId: string
      readonly webhookId: string
      readonly events: ReadonlyArray<StoredEvent>
      /** What to queue of the events still stored, given their earlier deliveries to the webhook. */
      readonly plan: (events: ReadonlyArray<StoredEvent>, earlier: ReadonlyArray<EarlierDelivery>) => ChunkPlan
      readonly position: Keyset
      readonly now: string
    }) =>
      Effect.gen(function*() {
        const { now } = input
        yield* sql.onDialectOrElse({
          pg: () => sql`SELECT id FROM webhooks WHERE id = ${input.webhookId} FOR UPDATE`,
          orElse: () => Effect.void
        })
        // The chunk's events were read before this transaction: retention may have deleted the
        // oldest since (the window reaches back to its edge). Those still stored are kept from it
        // until this commits; the others are passed over, as if read after their deletion.
        const ids = input.events.map((event) => event.id)
        const stored = new Set(
          (yield* sql<{ readonly id: string }>`SELECT id FROM events WHERE ${sql.in("id", padded(ids))}${
            lockRead(sql, "events", "id", "key share")
          }`).map((row) => row.id)
        )
        const events = input.events.filter((event) => stored.has(event.id))
        const planned = input.plan(events, yield* earlier(input.webhookId, events))
        const chunk = { ...input, ...planned }
        if (chunk.fresh.length > 0) {
          yield* sql`INSERT INTO deliveries ${
            sql.insert(chunk.fresh.map((row) => ({
              id: row.id,
              webhook_id: input.webhookId,
              event_id: row.event_id,
              message_id: row.message_id,
              status: "failed",
              attempts: 0,
              next_attempt_at: now,
              created_at: now,
              updated_at: now,
              body: row.body,
              replay_id: input.replayId
            })))
          }`
        }
        const again = chunk.again.length === 0 ? [] : yield* sql<{ readonly id: string }>`UPDATE deliveries
          SET status = 'failed', next_attempt_at = ${now}, final_attempt = attempts + 1, lease_owner = NULL,
            lease_expires_at = NULL, replay_id = ${input.replayId}, updated_at = ${now}, contact_key = NULL
          WHERE ${sql.in("id", padded(chunk.again))} AND ${sql.in("status", FINISHED)} RETURNING id`
        const queued = chunk.fresh.length + again.length
        yield* sql`UPDATE webhook_replays SET events_queued = events_queued + ${queued},
            already_queued = already_queued + ${chunk.alreadyQueued + chunk.again.length - again.length},
            next_cursor = ${encodeCursor(input.position)}
          WHERE id = ${input.replayId}`
        if (queued > 0) yield* announce(sql, channels.outbox, "replayed")
        return queued
      }).pipe(sql.withTransaction, Effect.orDie)

    const insert = (row: Omit<ReplayStored, "events_queued" | "already_queued" | "next_cursor" | "finished_at">) =>
      sql`INSERT INTO webhook_replays ${
        sql.insert({ ...row, events_queued: 0, already_queued: 0, next_cursor: null, finished_at: null })
      }`.pipe(Effect.asVoid)

    /** Marks the replay done: `nextCursor` where a further call goes on, or null when the window is through. */
    const finish = (replayId: string, nextCursor: string | null, now: string) =>
      sql`UPDATE webhook_replays SET next_cursor = ${nextCursor}, finished_at = ${now} WHERE id = ${replayId}`.pipe(
        Effect.asVoid,
        Effect.orDie
      )

    const find = (webhookId: string, replayId: string) =>
      replayRows(sql`SELECT * FROM webhook_replays WHERE id = ${replayId} AND webhook_id = ${webhookId}`).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    /** The replay's deliveries by status now (a delivery a later replay queued again counts in that one). */
    const progress = (replayId: string) =>
      statusCounts(sql`SELECT status, COUNT(*) AS n FROM deliveries WHERE replay_id = ${replayId} GROUP BY status`)
        .pipe(
          Effect.map((rows) => new Map(rows.map((row) => [row.status, row.n]))),
          Effect.orDie
        )

    return {
      events: (input: StoredEventsRequest) => storedEventsAfter(sql, input),
      queueChunk,
      insert,
      finish,
      find,
      progress
    } as const
  })
}) {}

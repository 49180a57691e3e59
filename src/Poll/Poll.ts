/**
 * A poll webhook's events (issue 33): nothing is pushed to it (Delivery/Outbox.ts queues deliveries
 * for push webhooks only); its instance's stored events are read in the order they arrived
 * ((received_at, id), the cursor's order), selected by its filter as the ingress selects for a push
 * (Delivery/Enqueue.ts bodyFor), and each answered with the headers a push would carry, signed with
 * its secret(s) (Delivery/Credentials.ts). Nothing is written: a poll is a read, served by any replica.
 *
 * Order and commits: a cursor moves past what it read, so an event must never commit behind one
 * already read. On SQLite one connection writes, one transaction at a time, and each event's
 * received_at is taken inside its transaction: arrival order is commit order. On PostgreSQL
 * replicas commit concurrently, so a poll reads only events received SETTLE_MS ago or more (an
 * event's transaction commits well within it).
 *
 * Waiting: with nothing new, a poll waits up to `wait` for an event. This process's new events wake
 * it (the live events bus, LiveEvents.ts nextEvent, which its ingress and queue publish to); on PostgreSQL
 * another replica's event reaches no bus of this process, so the database is also asked every
 * RECHECK_MS (as a repeated webhook test asks it, Webhooks/TestEvents.ts).
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect } from "effect"
import { HubConfig } from "../Config.js"
import { deliveryHeaders, makeCredentials, type SigningColumns } from "../Delivery/Credentials.js"
import { bodyFor } from "../Delivery/Enqueue.js"
import { storedFilter } from "../Domain/EventKinds.js"
import { encodeCursor, type Keyset } from "../Domain/Paging.js"
import { LiveEvents } from "../LiveEvents/LiveEvents.js"
import { isPostgres } from "../Sql/Dialect.js"
import { SecretCipher } from "../Sql/SecretCipher.js"
import { type StoredEvent, storedEventRecord, storedEventsAfter } from "../UpstreamEvents/Stored.js"

/** On PostgreSQL, how old an event must be to be read (see the header). */
const SETTLE_MS = 1_000

/** On PostgreSQL, how often a waiting poll asks the database for another replica's events. */
const RECHECK_MS = 500

/** Most stored events one answer reads past (events the webhook does not take included). */
const SCAN_MAX = 5_000

/** The webhook polled, as its record holds it. */
interface PolledWebhook {
  readonly id: string
  readonly organization_id: string
  readonly instance_id: string
  readonly created_at: string
  /** The kinds it takes; undefined for all. */
  readonly events: ReadonlyArray<string> | undefined
}

/** What a poll asks: where to start (after a cursor, or from a time), how many, how long to wait. */
interface PollRequest {
  readonly after: Keyset | undefined
  readonly since: string | undefined
  readonly limit: number
  readonly waitMs: number
}

interface PolledEvent {
  readonly event_id: string
  readonly received_at: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export class Poll extends Effect.Service<Poll>()("Poll", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* HubConfig
    const live = yield* LiveEvents
    const credentials = makeCredentials(yield* SecretCipher)
    const fleet = isPostgres(sql)

    /** The webhook's next events after `after` (at most `limit`), and where the read stopped; `more` when it stopped at the limit. */
    const read = (webhook: PolledWebhook, since: string, after: Keyset | undefined, limit: number) =>
      Effect.gen(function*() {
        const filter = storedFilter(webhook.events)
        const until = new Date(Date.now() - (fleet ? SETTLE_MS : 0)).toISOString()
        const taken: Array<StoredEvent> = []
        let position = after
        let scanned = 0
        while (taken.length < limit && scanned < SCAN_MAX) {
          const want = Math.min(limit - taken.length, SCAN_MAX - scanned)
          const rows = yield* storedEventsAfter(sql, {
            instanceId: webhook.instance_id,
            since,
            until,
            after: position,
            limit: want
          })
          for (const row of rows) {
            const record = storedEventRecord(webhook.instance_id, row)
            const body = record === undefined ? undefined : bodyFor(record, filter)
            if (body !== undefined) taken.push({ id: row.id, received_at: row.received_at, body: body ?? row.body })
            position = { createdAt: row.received_at, id: row.id }
          }
          scanned += rows.length
          if (rows.length < want) return { taken, position, more: false }
        }
        return { taken, position, more: true }
      })

    /** The events as a push would carry them, signed now. */
    const signed = (signing: SigningColumns, events: ReadonlyArray<StoredEvent>) =>
      Effect.gen(function*() {
        const nowMs = Date.now()
        const keys = yield* credentials(signing, nowMs)
        const timestamp = Math.floor(nowMs / 1000)
        return events.map((event): PolledEvent => ({
          event_id: event.id,
          received_at: event.received_at,
          // The event's id is its webhook-id: the same on every poll of it, so a consumer dedupes on it as on a push's.
          headers: deliveryHeaders(keys, event.id, timestamp, event.body),
          body: event.body
        }))
      })

    /** Waits for a sign of a new event, at most `ms`: this process's bus, and on PostgreSQL the next recheck. */
    const nextSign = (woken: Effect.Effect<void>, ms: number) =>
      Effect.timeoutOption(
        Effect.raceFirst(woken, fleet ? Effect.sleep(RECHECK_MS) : Effect.never),
        Duration.millis(ms)
      )

    /**
     * One look from `after`: the answer when events came, more wait, or the time is up; else, once a
     * sign of a new event came (or the time ran out), where the read reached.
     */
    const look = (
      webhook: PolledWebhook,
      request: PollRequest,
      window: { since: string; deadline: number },
      after: Keyset | undefined
    ) =>
      Effect.scoped(Effect.gen(function*() {
        // Armed before the read: an event committed between the read and the wait still wakes it.
        const woken = request.waitMs > 0 ? yield* live.nextEvent(webhook.instance_id) : Effect.void
        const page = yield* read(webhook, window.since, after, request.limit)
        const left = window.deadline - Date.now()
        if (page.taken.length > 0 || page.more || left <= 0) return { done: true, page } as const
        yield* nextSign(woken, left)
        return { done: false, page } as const
      }))

    const poll = (webhook: PolledWebhook, signing: SigningColumns, request: PollRequest) =>
      Effect.gen(function*() {
        const oldest = new Date(Date.now() - Duration.toMillis(config.retention)).toISOString()
        // Without a cursor, from `since` or the webhook's creation (a push webhook, too, receives what comes after it).
        const from = request.after === undefined ? (request.since ?? webhook.created_at) : oldest
        const window = { since: from < oldest ? oldest : from, deadline: Date.now() + request.waitMs }
        let looked = yield* look(webhook, request, window, request.after)
        while (!looked.done) looked = yield* look(webhook, request, window, looked.page.position)
        const { page } = looked
        return {
          data: yield* signed(signing, page.taken),
          next_cursor: page.position === undefined ? null : encodeCursor(page.position),
          more: page.more
        }
      })

    return { poll } as const
  })
}) {}

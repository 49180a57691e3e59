/**
 * Replays (issue 33): every stored event of a webhook's instance received in a window, that its
 * filter takes (and the replay's `events`, if given, narrows), delivered to it again. An event
 * delivered to the webhook before is queued again with its original webhook-id, so its receiver
 * dedupes it; any other (failed, filtered out then, or older than the webhook) gets a delivery of
 * its own. Bounded: the window lies within HUB_RETENTION, and a call walks at most HUB_REPLAY_MAX
 * events, answering a cursor to go on from. Written in chunks of CHUNK events, each its own short
 * transaction, so the hub's one SQLite connection is never held long; the dispatcher is woken after
 * each. An Idempotency-Key repeated within 24 hours answers the first call's replay as it stands.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Either, Option, Schema } from "effect"
import { HubConfig } from "../Config.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { bodyFor } from "../Delivery/Enqueue.js"
import { invalidField } from "../Domain/Errors.js"
import { ALL_KINDS, storedFilter } from "../Domain/EventKinds.js"
import { newId, nowIso } from "../Domain/Ids.js"
import { encodeCursor, type Keyset } from "../Domain/Paging.js"
import { type KeyKind, keysOf } from "../Sql/IdempotencyKeys.js"
import { storedEventRecord } from "../UpstreamEvents/Stored.js"
import type { StoredEvent } from "../UpstreamEvents/Stored.js"
import { type ChunkPlan, type EarlierDelivery, FINISHED, type ReplayedRow, ReplaysRepo } from "./Repo.js"

/**
 * Events written per transaction: each holds SQLite's one writer some 15 ms. Measured with 20,000
 * stored events on this machine: a call takes 0.9 s on SQLite (2.5 s with chunks of 256) and 4.8 s
 * on PostgreSQL (6.9 s), so HUB_REPLAY_MAX's 100,000 answer well within the server's idle timeout.
 */
const CHUNK = 1024

const ReplayKeyHeld = Schema.Struct({ replay_id: Schema.String })
const replayKeys: KeyKind<typeof ReplayKeyHeld.Type, typeof ReplayKeyHeld.Encoded> = {
  table: "webhook_replay_keys",
  scopeColumn: "webhook_id",
  window: Duration.hours(24),
  held: ReplayKeyHeld,
  columns: ["replay_id"]
}

/** The webhook replayed to, as its record holds it. */
interface ReplayedWebhook {
  readonly id: string
  readonly instance_id: string
  /** The kinds it takes; undefined for all. */
  readonly events: ReadonlyArray<string> | undefined
}

/** What a replay call asks, as the API took it. */
interface ReplayAsk {
  readonly since: string
  readonly until: string | undefined
  readonly events: ReadonlyArray<string> | undefined
  readonly after: Keyset | undefined
}

/** What a replay call asks, checked: a window within retention, a filter within the webhook's. */
interface ReplayRequest {
  readonly since: string
  readonly until: string
  /** The kinds replayed (the webhook's, narrowed by the request), as stored: null for all. */
  readonly filter: string | null
  readonly after: Keyset | undefined
}

/** How a replay call went: it started one, or its key answers an earlier one (or one being started). */
type ReplayStart =
  | { readonly _tag: "Started"; readonly replayId: string }
  | { readonly _tag: "Repeat"; readonly replayId: string }
  | { readonly _tag: "Busy" }

/** The kinds a replay takes, as stored (null: all): the webhook's, narrowed by the request's; undefined when none is left. */
const replayFilter = (
  webhookKinds: ReadonlyArray<string> | undefined,
  requested: ReadonlyArray<string> | undefined
): string | null | undefined => {
  const all = (kinds: ReadonlyArray<string> | undefined) => kinds === undefined || kinds.includes(ALL_KINDS)
  if (all(requested)) return storedFilter(webhookKinds)
  if (all(webhookKinds)) return storedFilter(requested)
  const taken = (requested ?? []).filter((kind) => webhookKinds?.includes(kind) === true)
  return taken.length === 0 ? undefined : storedFilter(taken)
}

/** Of a chunk of events, with their earlier deliveries: the new rows, the finished ones to queue again, the count queued already. */
const planChunk = (
  instanceId: string,
  filter: string | null,
  events: ReadonlyArray<StoredEvent>,
  earlier: ReadonlyArray<EarlierDelivery>
): ChunkPlan => {
  const before = new Map(earlier.map((row) => [row.event_id, row]))
  const fresh: Array<ReplayedRow> = []
  const again: Array<string> = []
  let alreadyQueued = 0
  const finished: ReadonlySet<string> = new Set(FINISHED)
  for (const event of events) {
    const record = storedEventRecord(instanceId, event)
    const body = record === undefined ? undefined : bodyFor(record, filter)
    if (body === undefined) continue
    // Delivered before: sent again as it was (same webhook-id, same body), unless it is queued still.
    const known = before.get(event.id)
    if (known === undefined) fresh.push({ id: newId("dlv"), message_id: newId("msg"), event_id: event.id, body })
    else if (finished.has(known.status)) again.push(known.id)
    else alreadyQueued++
  }
  return { fresh, again, alreadyQueued }
}

/** The request checked against the retention (`oldest`) and the webhook's filter; a 400 naming the field otherwise. */
const checked = (webhook: ReplayedWebhook, ask: ReplayAsk, retention: Duration.Duration, now: Date) => {
  const oldest = new Date(now.getTime() - Duration.toMillis(retention)).toISOString()
  const until = ask.until ?? now.toISOString()
  const filter = replayFilter(webhook.events, ask.events)
  if (ask.since < oldest) {
    return Either.left(
      invalidField("since", `must be within HUB_RETENTION (${Duration.format(retention)}): at or after ${oldest}`)
    )
  }
  if (until <= ask.since) return Either.left(invalidField("until", "must be after since"))
  if (filter === undefined) {
    return Either.left(
      invalidField("events", `must name a kind the webhook takes (${(webhook.events ?? []).join(", ")})`)
    )
  }
  return Either.right<ReplayRequest>({ since: ask.since, until, filter, after: ask.after })
}

export class Replays extends Effect.Service<Replays>()("Replays", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* ReplaysRepo
    const config = yield* HubConfig
    const signal = yield* DispatchSignal
    const keys = keysOf(sql, replayKeys)

    /** Takes the key (if any) and writes the replay's record, in one transaction. */
    const open = (webhook: ReplayedWebhook, request: ReplayRequest, key: string | undefined) =>
      Effect.gen(function*() {
        const at = new Date()
        const replayId = newId("rpl")
        if (key !== undefined) {
          yield* keys.purge(at, webhook.id)
          const claim = yield* keys.claim({ scope: webhook.id, key }, { replay_id: replayId }, at)
          if (claim._tag === "Held") return { _tag: "Repeat", replayId: claim.held.replay_id } satisfies ReplayStart
          if (claim._tag === "Busy") return { _tag: "Busy" } satisfies ReplayStart
        }
        yield* repo.insert({
          id: replayId,
          webhook_id: webhook.id,
          since: request.since,
          until: request.until,
          events: request.filter,
          created_at: at.toISOString()
        })
        return { _tag: "Started", replayId } satisfies ReplayStart
      }).pipe(sql.withTransaction, Effect.orDie)

    /** Walks the window chunk by chunk, at most HUB_REPLAY_MAX events; sets where a next call goes on (or null). */
    const walk = (webhook: ReplayedWebhook, request: ReplayRequest, replayId: string) =>
      Effect.gen(function*() {
        const window = { instanceId: webhook.instance_id, since: request.since, until: request.until }
        let position = request.after
        let walked = 0
        while (walked < config.replayMax) {
          const limit = Math.min(CHUNK, config.replayMax - walked)
          const events = yield* repo.events({ ...window, after: position, limit })
          const last = events[events.length - 1]
          if (last === undefined) break
          position = { createdAt: last.received_at, id: last.id }
          const queued = yield* repo.queueChunk({
            replayId,
            webhookId: webhook.id,
            events,
            plan: (stored, earlier) => planChunk(webhook.instance_id, request.filter, stored, earlier),
            position,
            now: nowIso()
          })
          if (queued > 0) signal.notify()
          walked += events.length
          if (events.length < limit) break
        }
        // Past the bound, a further call goes on from here if one more event waits.
        const more = walked >= config.replayMax && position !== undefined &&
          (yield* repo.events({ ...window, after: position, limit: 1 })).length > 0
        yield* repo.finish(replayId, more && position !== undefined ? encodeCursor(position) : null, nowIso())
      })

    /** Checks the request, opens the replay (or finds the key's) and walks its window. */
    const start = (webhook: ReplayedWebhook, ask: ReplayAsk, key: string | undefined) =>
      Effect.gen(function*() {
        const request = yield* checked(webhook, ask, config.retention, new Date())
        const opened = yield* open(webhook, request, key)
        // Bounded work: once started, a replay walks its window to the end even if its caller goes away.
        if (opened._tag === "Started") yield* Effect.uninterruptible(walk(webhook, request, opened.replayId))
        return opened
      })

    /** The replay's record and its deliveries by status now; none when it is not this webhook's. */
    const find = (webhookId: string, replayId: string) =>
      Effect.gen(function*() {
        const stored = yield* repo.find(webhookId, replayId)
        if (stored === undefined) return Option.none()
        return Option.some({ stored, statuses: yield* repo.progress(replayId) })
      })

    return { start, find } as const
  }),
  dependencies: [ReplaysRepo.Default]
}) {}

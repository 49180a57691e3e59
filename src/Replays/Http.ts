/** The replays group's handlers: the caller's webhook found and refused if not replayable; the steps in Replays.ts. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { HubApi } from "../Api.js"
import { Conflict, NotFound } from "../Domain/Errors.js"
import { ALL_KINDS, parseFilter } from "../Domain/EventKinds.js"
import { findOwn, inactive, pushedTo } from "../Webhooks/Http.js"
import type { WebhookRow } from "../Webhooks/Repo.js"
import type { ReplayHeaders, ReplayRequest } from "./Api.js"
import { Replays } from "./Replays.js"
import type { ReplayStored } from "./Repo.js"

const replayNotFound = (id: string) => new NotFound({ message: `replay ${id} was not found`, error: "not_found" })

/** A replayable webhook: pushed to, and active. */
const replayable = (webhook: WebhookRow) =>
  Effect.zipRight(
    pushedTo(webhook, "replay"),
    webhook.active ? Effect.void : Effect.fail(inactive(webhook.id, "replaying events to it"))
  )

/** The replay's answer: its record and its deliveries by outcome now. */
const replayRecord = (stored: ReplayStored, statuses: ReadonlyMap<string, number>) => {
  const count = (...names: ReadonlyArray<string>) => names.reduce((n, name) => n + (statuses.get(name) ?? 0), 0)
  return {
    id: stored.id,
    webhook_id: stored.webhook_id,
    since: stored.since,
    until: stored.until,
    events: parseFilter(stored.events) ?? [ALL_KINDS],
    queued: stored.events_queued,
    already_queued: stored.already_queued,
    deliveries: {
      queued: count("pending", "failed"),
      delivered: count("succeeded"),
      failed: count("dead", "cancelled")
    },
    // While it runs, next_cursor is where it stands, not yet where a next call goes on.
    next_cursor: stored.finished_at === null ? null : stored.next_cursor,
    finished_at: stored.finished_at,
    created_at: stored.created_at
  }
}

const readReplay = (webhookId: string, replayId: string) =>
  Effect.gen(function*() {
    const found = yield* Effect.flatMap(Replays, (replays) => replays.find(webhookId, replayId))
    if (Option.isNone(found)) return yield* replayNotFound(replayId)
    return replayRecord(found.value.stored, found.value.statuses)
  })

const startReplay = (id: string, payload: typeof ReplayRequest.Type, headers: typeof ReplayHeaders.Type) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    yield* replayable(webhook)
    const replays = yield* Replays
    const started = yield* replays.start(
      webhook,
      { since: payload.since, until: payload.until, events: payload.events, after: payload.cursor },
      headers["idempotency-key"]
    )
    if (started._tag === "Busy") {
      return yield* new Conflict({
        message: "a replay with this Idempotency-Key is being started; repeat the request in a moment",
        error: "idempotency_key_in_use"
      })
    }
    return yield* readReplay(webhook.id, started.replayId)
  })

export const ReplaysHttpLive = HttpApiBuilder.group(HubApi, "replays", (handlers) =>
  handlers
    .handle("replay", ({ headers, path, payload }) => startReplay(path.id, payload, headers))
    .handle("replayProgress", ({ path }) =>
      Effect.flatMap(findOwn(path.id), (webhook) => readReplay(webhook.id, path.replayId)))).pipe(
    Layer.provide(Replays.Default)
  )

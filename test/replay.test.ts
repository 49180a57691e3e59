/**
 * Replays (issue 33) through the real HTTP server on both engines, to receivers started here: an
 * event delivered before is sent again with its webhook-id, a new webhook is backfilled, the
 * webhook's filter and the request's `events` select, the cursor goes on past HUB_REPLAY_MAX, an
 * Idempotency-Key answers the first replay, progress is readable, and bad input is refused.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { Webhook } from "standardwebhooks"
import { newId } from "../src/Domain/Ids.js"
import { ReplaysRepo } from "../src/Replays/Repo.js"
import { engines } from "./support/Databases.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { heldOpen, waitingForLock } from "./support/RowLocks.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { createTyped, postUpstream as post } from "./support/TypedWebhooks.js"
import { envelope, inboundChange, META_MESSAGES, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const REPLAY_MAX = 3

const replay = (tenant: Tenant, webhookId: string, json: Record<string, unknown>, key?: string) =>
  Effect.flatMap(TestHub, (hub) =>
    hub.request("POST", `/api/webhooks/${webhookId}/replay`, {
      token: tenant.instanceToken,
      json,
      ...(key === undefined ? {} : { headers: { "idempotency-key": key } })
    }))

const progress = (tenant: Tenant, webhookId: string, replayId: string) =>
  Effect.flatMap(
    TestHub,
    (hub) => hub.request("GET", `/api/webhooks/${webhookId}/replays/${replayId}`, { token: tenant.instanceToken })
  )

const verify = (secret: string, request: ReceivedRequest | undefined) =>
  new Webhook(secret).verify(request?.body ?? "", {
    "webhook-id": request?.headers["webhook-id"] ?? "",
    "webhook-timestamp": request?.headers["webhook-timestamp"] ?? "",
    "webhook-signature": request?.headers["webhook-signature"] ?? ""
  })

const nowSeconds = () => Math.floor(Date.now() / 1000)

const inbound = (tenant: Tenant) =>
  envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.text, id: wamid() })]])
const statusEvent = (tenant: Tenant) =>
  envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "delivered", nowSeconds()))]])

/**
 * A new tenant's two events, received while it had no webhook (so no delivery names them), then a
 * webhook taking every kind, with its receiver; `since` lies before the events.
 */
const eventsBeforeWebhook = Effect.gen(function*() {
  const tenant = yield* seedTenant()
  const since = new Date(Date.now() - 1000).toISOString()
  yield* post(inbound(tenant))
  yield* post(statusEvent(tenant))
  const receiver = yield* makeReceiver()
  const hook = yield* createTyped(tenant.instanceToken, { name: "after", url: receiver.url })
  return { tenant, hook, receiver, since }
})

/** What retention's pass does to an event no delivery names: its dedupe keys and itself deleted. */
const retentionDeletes = (eventId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.zipRight(
      sql`DELETE FROM event_changes WHERE event_id = ${eventId}`,
      sql`DELETE FROM events WHERE id = ${eventId}`
    ))

const ids = (requests: ReadonlyArray<ReceivedRequest>) => requests.map((r) => r.headers["webhook-id"] ?? "")

for (const engine of engines) {
  layer(
    testHub({
      engine,
      webhookTimeout: Duration.seconds(2),
      webhookRetry: [Duration.millis(10)],
      replayMax: REPLAY_MAX
    }),
    { excludeTestServices: true }
  )(`replay (${engine})`, (it) => {
    it.scoped("sends delivered events again with their webhook-id, backfills a new webhook through its filter, and reports progress", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        const first = yield* makeReceiver()
        const hook = yield* createTyped(tenant.instanceToken, { name: "first", url: first.url })
        const message = inbound(tenant)
        const statuses = statusEvent(tenant)
        yield* post(message)
        yield* post(statuses)
        const live = yield* first.waitFor("the live events", (r) => r.length === 2)

        // A webhook created afterwards, taking statuses only: backfilled with the status event alone.
        const later = yield* makeReceiver()
        const newer = yield* createTyped(tenant.instanceToken, { name: "later", url: later.url, events: ["statuses"] })
        const backfill = yield* replay(tenant, newer.id, { since })
        expect(backfill.status, backfill.text).toBe(201)
        expect(backfill.body).toMatchObject({ webhook_id: newer.id, queued: 1, already_queued: 0, next_cursor: null })
        const [backfilled] = yield* later.waitFor("the backfilled status", (r) => r.length === 1)
        expect(JSON.parse(backfilled?.body ?? "")).toEqual(statuses)
        expect(verify(newer.secret, backfilled)).toEqual(statuses)
        expect(ids(live)).not.toContain(backfilled?.headers["webhook-id"])

        // The first webhook gets both again, each with the webhook-id and body it had.
        const again = yield* replay(tenant, hook.id, { since })
        expect(again.body).toMatchObject({ queued: 2, already_queued: 0, events: ["*"] })
        const all = yield* first.waitFor("both again", (r) => r.length === 4)
        expect(new Set(ids(all.slice(2)))).toEqual(new Set(ids(live)))
        for (const request of all.slice(2)) {
          const original = live.find((r) => r.headers["webhook-id"] === request.headers["webhook-id"])
          expect(request.body).toBe(original?.body)
          verify(hook.secret, request)
        }
        const done = yield* untilAttemptsLogged(
          "the replay's deliveries succeeded",
          progress(tenant, hook.id, String(again.body.id)),
          (read) => JSON.stringify(read.body.deliveries) === JSON.stringify({ queued: 0, delivered: 2, failed: 0 })
        )
        expect(done.status).toBe(200)
        expect(done.body.finished_at).toEqual(expect.any(String))

        // `events` narrows: only the inbound message, again with its webhook-id.
        const narrowed = yield* replay(tenant, hook.id, { since, events: ["messages"] })
        expect(narrowed.body).toMatchObject({ queued: 1, events: ["messages"] })
        const [, , , , messageAgain] = yield* first.waitFor("the message again", (r) => r.length === 5)
        expect(JSON.parse(messageAgain?.body ?? "")).toEqual(message)
        expect(ids(live)).toContain(messageAgain?.headers["webhook-id"])
      }))

    it.scoped("a dead delivery is sent again with its webhook-id, and its progress counts it delivered", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        let up = false
        const receiver = yield* makeReceiver(() => ({ status: up ? 200 : 503 }))
        const hook = yield* createTyped(tenant.instanceToken, { name: "flaky", url: receiver.url })
        yield* post(statusEvent(tenant))
        // Refused, retried once (HUB_WEBHOOK_RETRY 10ms), refused again: dead.
        const refused = yield* receiver.waitFor("both refused attempts", (r) => r.length === 2)
        const deadOne = yield* untilAttemptsLogged(
          "the delivery dead",
          Effect.flatMap(
            TestHub,
            (hub) =>
              hub.request("GET", `/api/webhooks/${hook.id}/deliveries?status=dead`, { token: tenant.instanceToken })
          ),
          (read) => Array.isArray(read.body.data) && read.body.data.length === 1
        )
        expect(deadOne.status).toBe(200)
        up = true
        const again = yield* replay(tenant, hook.id, { since })
        expect(again.body).toMatchObject({ queued: 1, already_queued: 0 })
        const [, , third] = yield* receiver.waitFor("the replayed attempt", (r) => r.length === 3)
        expect(third?.headers["webhook-id"]).toBe(refused[0]?.headers["webhook-id"])
        yield* untilAttemptsLogged(
          "the replay's delivery succeeded",
          progress(tenant, hook.id, String(again.body.id)),
          (read) => JSON.stringify(read.body.deliveries) === JSON.stringify({ queued: 0, delivered: 1, failed: 0 })
        )
      }))

    it.scoped("walks at most HUB_REPLAY_MAX events a call and goes on from the cursor", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        const posted = [inbound(tenant), statusEvent(tenant), inbound(tenant), statusEvent(tenant), inbound(tenant)]
        for (const payload of posted) yield* post(payload)
        const receiver = yield* makeReceiver()
        const hook = yield* createTyped(tenant.instanceToken, { name: "backfilled", url: receiver.url })
        const firstCall = yield* replay(tenant, hook.id, { since })
        expect(firstCall.body).toMatchObject({ queued: REPLAY_MAX, next_cursor: expect.any(String) })
        const secondCall = yield* replay(tenant, hook.id, { since, cursor: firstCall.body.next_cursor })
        expect(secondCall.body).toMatchObject({ queued: 2, next_cursor: null })
        const received = yield* receiver.waitFor("all five", (r) => r.length === 5)
        // Oldest first within each call, every event once.
        expect(received.map((r) => JSON.parse(r.body)).sort(byText)).toEqual([...posted].sort(byText))
        expect(new Set(ids(received)).size).toBe(5)
      }))

    it.scoped("an Idempotency-Key answers the first replay instead of replaying again", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        yield* post(inbound(tenant))
        const receiver = yield* makeReceiver()
        const hook = yield* createTyped(tenant.instanceToken, { name: "keyed", url: receiver.url })
        const once = yield* replay(tenant, hook.id, { since }, "replay-1")
        const twice = yield* replay(tenant, hook.id, { since }, "replay-1")
        expect(twice.status).toBe(201)
        expect(twice.body.id).toBe(once.body.id)
        const rows = yield* sql<
          { readonly n: number }
        >`SELECT COUNT(*) AS n FROM deliveries WHERE webhook_id = ${hook.id}`
        expect(Number(rows[0]?.n)).toBe(1)
        const other = yield* replay(tenant, hook.id, { since }, "replay-2")
        expect(other.body.id).not.toBe(once.body.id)
      }))

    it.scoped("two replays of a window at once queue each event once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        for (let i = 0; i < REPLAY_MAX; i++) yield* post(inbound(tenant))
        const receiver = yield* makeReceiver()
        const hook = yield* createTyped(tenant.instanceToken, { name: "twice", url: receiver.url })
        const [one, two] = yield* Effect.all([replay(tenant, hook.id, { since }), replay(tenant, hook.id, { since })], {
          concurrency: 2
        })
        // Whichever went first queued them; the other found them queued (or, once delivered, sent them again).
        expect(
          Number(one?.body.queued) + Number(two?.body.queued) + Number(one?.body.already_queued) +
            Number(two?.body.already_queued)
        ).toBe(2 * REPLAY_MAX)
        const rows = yield* sql<
          { readonly n: number }
        >`SELECT COUNT(*) AS n FROM deliveries WHERE webhook_id = ${hook.id}`
        expect(Number(rows[0]?.n)).toBe(REPLAY_MAX)
      }))

    it.scoped("a chunk passes over an event that retention deleted after the walk read it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const repo = yield* Effect.provide(ReplaysRepo, ReplaysRepo.Default)
        const { tenant, hook, receiver, since } = yield* eventsBeforeWebhook
        const events = yield* repo.events({
          instanceId: tenant.instanceId,
          since,
          until: new Date().toISOString(),
          after: undefined,
          limit: 10
        })
        const [gone, kept] = events
        expect(events).toHaveLength(2)
        yield* retentionDeletes(gone?.id ?? "")
        const replayId = newId("rpl")
        yield* repo.insert({
          id: replayId,
          webhook_id: hook.id,
          since,
          until: new Date().toISOString(),
          events: null,
          created_at: new Date().toISOString()
        })
        const queued = yield* repo.queueChunk({
          replayId,
          webhookId: hook.id,
          events,
          // Each event still stored gets a delivery of its own.
          plan: (stored) => ({
            fresh: stored.map((event) => ({
              id: newId("dlv"),
              message_id: newId("msg"),
              event_id: event.id,
              body: event.body
            })),
            again: [],
            alreadyQueued: 0
          }),
          position: { createdAt: kept?.received_at ?? "", id: kept?.id ?? "" },
          now: new Date().toISOString()
        })
        expect(queued).toBe(1)
        const [delivered] = yield* receiver.waitFor("the event still stored", (r) => r.length === 1)
        expect(JSON.parse(delivered?.body ?? "")).toEqual(JSON.parse(kept?.body ?? ""))
        const named = yield* sql<{ readonly event_id: string }>`SELECT event_id FROM deliveries
          WHERE webhook_id = ${hook.id}`
        expect(named.map((row) => row.event_id)).toEqual([kept?.id])
      }))

    if (engine === "postgres") {
      it.scoped("a replay waits for retention deleting one of its events, then queues the others (201)", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const { tenant, hook, receiver, since } = yield* eventsBeforeWebhook
          const [gone, kept] = yield* sql<{ readonly id: string }>`SELECT id FROM events
            WHERE instance_id = ${tenant.instanceId} ORDER BY id`
          const deletion = yield* heldOpen(retentionDeletes(gone?.id ?? ""))
          const answer = yield* Effect.fork(replay(tenant, hook.id, { since }))
          // The walk read both events; its chunk waits for the deletion's lock on the first.
          yield* waitingForLock("")
          yield* deletion.commit
          const replayed = yield* Fiber.join(answer)
          expect(replayed.status, replayed.text).toBe(201)
          expect(replayed.body).toMatchObject({ queued: 1, already_queued: 0, next_cursor: null })
          yield* receiver.waitFor("the event still stored", (r) => r.length === 1)
          const named = yield* sql<{ readonly event_id: string }>`SELECT event_id FROM deliveries
            WHERE webhook_id = ${hook.id}`
          expect(named.map((row) => row.event_id)).toEqual([kept?.id])
        }))
    }

    it.scoped("refuses bad input with a clear error, and answers 404 for another tenant's or an unknown replay", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const stranger = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const hook = yield* createTyped(tenant.instanceToken, { name: "r", url: receiver.url, events: ["statuses"] })
        const since = new Date(Date.now() - 60_000).toISOString()
        const refusals: ReadonlyArray<readonly [Record<string, unknown>, string]> = [
          [{}, "since"],
          [{ since: "yesterday" }, "since"],
          [{ since: "1900-01-01" }, "since: must be within HUB_RETENTION"],
          [{ since, until: since }, "until: must be after since"],
          [{ since, events: ["messages"] }, "events: must name a kind the webhook takes"],
          [{ since, events: ["Not A Kind"] }, "events"],
          [{ since, cursor: "not a cursor!" }, "cursor"]
        ]
        for (const [json, message] of refusals) {
          const refused = yield* replay(tenant, hook.id, json)
          expect(refused.status, JSON.stringify(json)).toBe(400)
          expect(refused.body.message).toContain(message)
        }
        expect((yield* replay(stranger, hook.id, { since })).status).toBe(404)
        expect((yield* progress(tenant, hook.id, "rpl_unknown")).status).toBe(404)
        const made = yield* replay(tenant, hook.id, { since })
        expect((yield* progress(stranger, hook.id, String(made.body.id))).status).toBe(404)
        const hub = yield* TestHub
        yield* hub.request("PATCH", `/api/webhooks/${hook.id}`, {
          token: tenant.instanceToken,
          json: { active: false }
        })
        const inactive = yield* replay(tenant, hook.id, { since })
        expect(inactive.status).toBe(409)
        expect(inactive.body.error).toBe("webhook_inactive")
      }))
  })
}

// One dispatch slot: what is leased next is what the dispatcher's order puts first.
layer(testHub({ webhookTimeout: Duration.seconds(5), dispatchConcurrency: 1 }), { excludeTestServices: true })(
  "replay behind live traffic",
  (it) => {
    it.scoped("a live event's first attempt goes before the replayed deliveries queued ahead of it", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const since = new Date(Date.now() - 1000).toISOString()
        const replayed = [inbound(tenant), inbound(tenant), inbound(tenant)]
        for (const payload of replayed) yield* post(payload)
        // The first replayed attempt is held until the live event is queued behind the replay's rows.
        let release: () => void = () => {}
        const held = new Promise<void>((resolve) => {
          release = resolve
        })
        const receiver = yield* makeReceiver((
          _,
          index
        ) => (index === 0 ? held.then(() => ({ status: 200 })) : { status: 200 }))
        const hook = yield* createTyped(tenant.instanceToken, { name: "backfilled", url: receiver.url })
        expect((yield* replay(tenant, hook.id, { since })).body).toMatchObject({ queued: 3 })
        yield* receiver.waitFor("the first replayed attempt", (r) => r.length === 1)
        const live = statusEvent(tenant)
        yield* post(live)
        release()
        const received = yield* receiver.waitFor("all four", (r) => r.length === 4)
        expect(JSON.parse(received[1]?.body ?? "")).toEqual(live)
      }))
  }
)

const byText = (a: unknown, b: unknown) => JSON.stringify(a).localeCompare(JSON.stringify(b))

/**
 * The pull endpoint (issue 33) through the real HTTP server on both engines: a poll webhook is never
 * pushed to; its events answer in order with the next cursor, selected by its filter, each with the
 * body and signature headers a push carries (verified with its secret like a push); a long poll is
 * woken by a new upstream post; `since` reads events from before its creation; bad input is refused.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Fiber, Stream } from "effect"
import { Webhook } from "standardwebhooks"
import { LiveEvents } from "../src/LiveEvents/LiveEvents.js"
import { engines } from "./support/Databases.js"
import { makeReceiver } from "./support/Receivers.js"
import { itemsOf, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { createTyped, postUpstream as post } from "./support/TypedWebhooks.js"
import { envelope, inboundChange, META_MESSAGES, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const pollRaw = (tenant: Tenant, webhookId: string, query: Record<string, string>) =>
  Effect.flatMap(
    TestHub,
    (hub) =>
      hub.request("GET", `/api/webhooks/${webhookId}/poll?${new URLSearchParams(query).toString()}`, {
        token: tenant.instanceToken
      })
  )

interface Polled {
  readonly event_id: string
  readonly headers: Record<string, string>
  readonly body: string
}

const polledOf = (body: Readonly<Record<string, unknown>>): ReadonlyArray<Polled> =>
  itemsOf(body, "data").map((item) => ({
    event_id: String(item.event_id),
    headers: Object.fromEntries(
      Object.entries(typeof item.headers === "object" && item.headers !== null ? item.headers : {}).map((
        [k, v]
      ) => [k, String(v)])
    ),
    body: String(item.body)
  }))

/** Polls (waiting up to 5 s each time) from `cursor` on, following next_cursor, until `count` events came; the events and the last cursor. */
const pollUntil = (tenant: Tenant, webhookId: string, count: number, first: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const events: Array<Polled> = []
    let query: Record<string, string> = { wait: "5", ...first }
    let cursor: string | undefined
    for (let round = 0; events.length < count && round < 20; round++) {
      const answer = yield* pollRaw(tenant, webhookId, query)
      expect(answer.status, answer.text).toBe(200)
      events.push(...polledOf(answer.body))
      cursor = typeof answer.body.next_cursor === "string" ? answer.body.next_cursor : cursor
      query = { wait: "5", ...(cursor === undefined ? first : { cursor }) }
    }
    return { events, cursor }
  })

const verify = (secret: string, polled: Polled | undefined) =>
  new Webhook(secret).verify(polled?.body ?? "", {
    "webhook-id": polled?.headers["webhook-id"] ?? "",
    "webhook-timestamp": polled?.headers["webhook-timestamp"] ?? "",
    "webhook-signature": polled?.headers["webhook-signature"] ?? ""
  })

const nowSeconds = () => Math.floor(Date.now() / 1000)
const inbound = (tenant: Tenant) =>
  envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.text, id: wamid() })]])
const statusEvent = (tenant: Tenant) =>
  envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "delivered", nowSeconds()))]])

for (const engine of engines) {
  layer(testHub({ engine, webhookTimeout: Duration.seconds(2) }), { excludeTestServices: true })(
    `poll (${engine})`,
    (it) => {
      it.scoped("answers a poll webhook's events in order, filtered and signed as a push, with the next cursor; nothing is pushed", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const pulled = yield* createTyped(tenant.instanceToken, { name: "pull", kind: "poll", events: ["messages"] })
          expect(pulled).toMatchObject({ kind: "poll", url: "", events: ["messages"] })
          const receiver = yield* makeReceiver()
          yield* createTyped(tenant.instanceToken, { name: "push", url: receiver.url, events: ["messages"] })
          const first = inbound(tenant)
          const second = inbound(tenant)
          yield* post(first)
          yield* post(statusEvent(tenant))
          yield* post(second)

          const { cursor, events } = yield* pollUntil(tenant, pulled.id, 2)
          expect(events.map((e) => JSON.parse(e.body))).toEqual([first, second])
          for (const event of events) {
            expect(verify(pulled.secret, event)).toEqual(JSON.parse(event.body))
            expect(event.headers["webhook-id"]).toBe(event.event_id)
            expect(event.headers["content-type"]).toBe("application/json")
          }
          // The same envelopes a push carries.
          const pushed = yield* receiver.waitFor("both messages pushed", (r) => r.length === 2)
          expect(pushed.map((r) => r.body)).toEqual(events.map((e) => e.body))
          // Nothing was queued for the poll webhook.
          const log = yield* hub.request("GET", `/api/webhooks/${pulled.id}/deliveries`, {
            token: tenant.instanceToken
          })
          expect(itemsOf(log.body, "data")).toEqual([])

          // From the cursor: nothing new, the cursor stays; then one new event, alone.
          const nothing = yield* pollRaw(tenant, pulled.id, { cursor: cursor ?? "" })
          expect(nothing.body).toMatchObject({ data: [], next_cursor: cursor, more: false })
          const third = inbound(tenant)
          yield* post(third)
          const after = yield* pollUntil(tenant, pulled.id, 1, { cursor: cursor ?? "" })
          expect(after.events.map((e) => JSON.parse(e.body))).toEqual([third])

          // limit pages them, `more` saying another page waits; a repeat of a cursor answers the same event, same webhook-id.
          const page = yield* pollRaw(tenant, pulled.id, { since: "2000-01-01", limit: "1" })
          expect(page.body.more).toBe(true)
          expect(polledOf(page.body).map((e) => e.event_id)).toEqual([events[0]?.event_id])
        }))

      it.scoped(
        "a long poll waits for the next event and is woken by a new upstream post",
        () =>
          Effect.gen(function*() {
            const live = yield* LiveEvents
            const tenant = yield* seedTenant()
            const pulled = yield* createTyped(tenant.instanceToken, { name: "pull", kind: "poll" })
            const waiting = yield* Effect.fork(pollRaw(tenant, pulled.id, { wait: "30" }))
            // Once the poll listens (it found nothing and waits), an event is posted.
            yield* Stream.runHead(Stream.filter(live.armed, (armed) => armed > 0))
            // A waiting poll is no event stream: it takes none of the organization's stream limit.
            expect(live.openStreams(tenant.organizationId)).toBe(0)
            const event = statusEvent(tenant)
            yield* post(event)
            const answer = yield* Fiber.join(waiting)
            expect(answer.status).toBe(200)
            const [polled] = polledOf(answer.body)
            expect(JSON.parse(polled?.body ?? "")).toEqual(event)
            expect(verify(pulled.secret, polled)).toEqual(event)
          }),
        { timeout: 20_000 }
      )

      it.scoped("starts at the webhook's creation, or at `since` for events from before it", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const since = new Date(Date.now() - 1000).toISOString()
          const earlier = inbound(tenant)
          yield* post(earlier)
          const pulled = yield* createTyped(tenant.instanceToken, { name: "pull", kind: "poll" })
          const later = statusEvent(tenant)
          yield* post(later)
          const fromCreation = yield* pollUntil(tenant, pulled.id, 1)
          expect(fromCreation.events.map((e) => JSON.parse(e.body))).toEqual([later])
          const fromSince = yield* pollUntil(tenant, pulled.id, 2, { since })
          expect(fromSince.events.map((e) => JSON.parse(e.body))).toEqual([earlier, later])
        }))

      it.scoped("refuses bad input, a push webhook's poll, and what only a push webhook does", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const stranger = yield* seedTenant()
          const receiver = yield* makeReceiver()
          const pulled = yield* createTyped(tenant.instanceToken, { name: "pull", kind: "poll" })
          const pushed = yield* createTyped(tenant.instanceToken, { name: "push", url: receiver.url })
          const refusals: ReadonlyArray<readonly [Record<string, string>, string]> = [
            [{ limit: "0" }, "limit"],
            [{ limit: "501" }, "limit"],
            [{ wait: "31" }, "wait"],
            [{ wait: "soon" }, "wait"],
            [{ cursor: "not a cursor!" }, "cursor"],
            [{ since: "yesterday" }, "since"]
          ]
          for (const [query, field] of refusals) {
            const refused = yield* pollRaw(tenant, pulled.id, query)
            expect(refused.status, JSON.stringify(query)).toBe(400)
            expect(refused.body.message).toContain(field)
          }
          const push = yield* pollRaw(tenant, pushed.id, {})
          expect([push.status, push.body.error]).toEqual([409, "push_webhook"])
          expect((yield* pollRaw(stranger, pulled.id, {})).status).toBe(404)

          const request = (method: string, path: string, json?: unknown) =>
            hub.request(method, path, { token: tenant.instanceToken, ...(json === undefined ? {} : { json }) })
          const withUrl = yield* request("POST", "/api/webhooks", { name: "x", kind: "poll", url: receiver.url })
          expect([withUrl.status, withUrl.body.message]).toEqual([400, expect.stringContaining("url")])
          const noUrl = yield* request("POST", "/api/webhooks", { name: "x" })
          expect([noUrl.status, noUrl.body.message]).toEqual([400, expect.stringContaining("url")])
          const patched = yield* request("PATCH", `/api/webhooks/${pulled.id}`, { url: receiver.url })
          expect([patched.status, patched.body.message]).toEqual([
            400,
            expect.stringContaining("a poll webhook has no url")
          ])
          for (
            const [method, path, json] of [
              ["POST", `/api/webhooks/${pulled.id}/test`, undefined],
              ["POST", `/api/webhooks/${pulled.id}/recover`, { since: "2026-01-01" }],
              ["POST", `/api/webhooks/${pulled.id}/replay`, { since: "2026-01-01" }]
            ] as const
          ) {
            const refused = yield* request(method, path, json)
            expect([refused.status, refused.body.error], path).toEqual([409, "poll_webhook"])
          }
          yield* request("PATCH", `/api/webhooks/${pulled.id}`, { active: false })
          const inactive = yield* pollRaw(tenant, pulled.id, {})
          expect([inactive.status, inactive.body.error]).toEqual([409, "webhook_inactive"])
        }))
    }
  )
}

/**
 * The dispatcher through the real HTTP server and real receivers: fan-out, retries, 410, timeouts,
 * redirects, Retry-After, Standard Webhooks signatures (checked with the `standardwebhooks` package),
 * replay, rotation, cancellation, auto-disable, concurrency, the attempt log, the lease order, the
 * delivery-time address check and graceful shutdown.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import {
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  LogLevel,
  Option,
  Redacted,
  Schedule,
  Schema,
  Scope
} from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Webhook } from "standardwebhooks"
import type { HubSettings } from "../src/Config.js"
import { Handoff } from "../src/Delivery/Handoff.js"
import { leaseQueries } from "../src/Delivery/Lease.js"
import { OutboxRepo } from "../src/Delivery/Outbox.js"
import type { LeasedDelivery } from "../src/Delivery/Records.js"
import { afterFailure } from "../src/Delivery/RetryPolicy.js"
import { hubServer } from "../src/Edge/FastLane.js"
import { Readiness } from "../src/Health/Readiness.js"
import { hubLayer } from "../src/Http.js"
import { parseRetryAfter } from "../src/Net/RetryAfter.js"
import { HostResolver } from "../src/Net/UrlPolicy.js"
import { WebhooksRepo } from "../src/Webhooks/Repo.js"
import { type Engine, engines, testDatabase, testDatabaseUrl } from "./support/Databases.js"
import { scrape } from "./support/MetricsScrape.js"
import { addOrganization, addWebhooks, deliveryRow, seedOutboxParents } from "./support/OutboxParents.js"
import { OK, rawReceiver } from "./support/RawReceiver.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import {
  createWebhook,
  itemsOf,
  seedTenant,
  type Tenant,
  TestHub,
  testHub,
  testHubConfig,
  TestHubLive
} from "./support/TestHub.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

// Long enough that a receiver answering at once is never taken for a silent one on a loaded machine (500 ms was not,
// once, under CI with four test files at a time); the silent receivers cost it per attempt.
const TIMEOUT_MS = 1_500

/** A delivery as the deliveries API answers it (decoded, so a wrong shape fails the test). */
const DeliveryView = Schema.Struct({
  id: Schema.String,
  message_id: Schema.String,
  status: Schema.String,
  attempts: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.String),
  last_status_code: Schema.NullOr(Schema.Number),
  last_error: Schema.NullOr(Schema.String),
  updated_at: Schema.String,
  attempt_log: Schema.Array(Schema.Struct({
    attempt: Schema.Number,
    status_code: Schema.NullOr(Schema.Number),
    error: Schema.NullOr(Schema.String),
    response_snippet: Schema.NullOr(Schema.String),
    latency_ms: Schema.Number
  }))
})
type DeliveryView = typeof DeliveryView.Type
const deliveryViews = (body: Readonly<Record<string, unknown>>) =>
  Schema.decodeUnknownSync(Schema.Array(DeliveryView))(body.data)

const postEvent = (tenant: Tenant, messageId: string = wamid()) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const payload = envelope([tenant.wabaId, [statusChange(tenant, status(messageId, "sent", 1750263773))]])
    const posted = yield* hub.request("POST", "/upstream/events", { json: payload })
    expect(posted.status).toBe(200)
    return { payload, answer: posted.body }
  })

const deliveries = (tenant: Tenant, webhookId: string, query = "") =>
  Effect.flatMap(
    TestHub,
    (hub) => hub.request("GET", `/api/webhooks/${webhookId}/deliveries${query}`, { token: tenant.instanceToken })
  )

/** Reads the delivery log until the condition holds: at once, then each time the dispatcher logs attempts (bounded by a deadline). */
const untilDeliveries = (
  tenant: Tenant,
  webhookId: string,
  what: string,
  condition: (data: ReadonlyArray<DeliveryView>) => boolean
) =>
  untilAttemptsLogged(
    `deliveries: ${what}`,
    Effect.map(deliveries(tenant, webhookId), (answer) => deliveryViews(answer.body)),
    condition
  )

const verify = (secret: string, request: ReceivedRequest | undefined) =>
  new Webhook(secret).verify(request?.body ?? "", {
    "webhook-id": request?.headers["webhook-id"] ?? "",
    "webhook-timestamp": request?.headers["webhook-timestamp"] ?? "",
    "webhook-signature": request?.headers["webhook-signature"] ?? ""
  })

const dispatcherHub = (engine: Engine) =>
  testHub({
    engine,
    webhookTimeout: Duration.millis(TIMEOUT_MS),
    webhookRetry: [Duration.millis(10), Duration.millis(20)],
    dispatchPerWebhook: 2
  })

for (const engine of engines) {
  layer(dispatcherHub(engine), { excludeTestServices: true })(`dispatcher (${engine})`, (it) => {
    it.scoped("fan-out to three webhooks: a 500 that recovers, a 410 that disables, a receiver that times out", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const flaky = yield* makeReceiver((
          _,
          index
        ) => (index === 0 ? { status: 500, body: "boom" } : { status: 200, body: "ok" }))
        const gone = yield* makeReceiver(() => ({ status: 410 }))
        const slow = yield* makeReceiver(() => "hang")
        const flakyHook = yield* createWebhook(tenant, flaky.url)
        const goneHook = yield* createWebhook(tenant, gone.url)
        const slowHook = yield* createWebhook(tenant, slow.url)

        const first = yield* postEvent(tenant)
        expect(first.answer).toMatchObject({ deliveries: 3 })
        const flakyGot = yield* flaky.waitFor("a failure and a retry", (r) => r.length === 2)
        yield* gone.waitFor("one attempt", (r) => r.length === 1)
        yield* slow.waitFor("three attempts", (r) => r.length === 3)

        // The retry is the same message: same webhook-id and body, each attempt signed afresh.
        expect(flaky.distinctIds().size).toBe(1)
        for (const request of flakyGot) {
          expect(JSON.parse(request.body)).toEqual(first.payload)
          expect(verify(flakyHook.secret, request)).toEqual(first.payload)
        }
        const [flakyDelivery] = yield* untilDeliveries(
          tenant,
          flakyHook.id,
          "success",
          (d) => d[0]?.status === "succeeded"
        )
        expect(flakyDelivery).toMatchObject({
          status: "succeeded",
          attempts: 2,
          last_status_code: 200,
          next_attempt_at: null,
          last_error: null
        })
        expect(flakyDelivery?.message_id).toBe(flakyGot[0]?.headers["webhook-id"])
        expect(flakyDelivery?.attempt_log.map((a) => [a.attempt, a.status_code, a.error, a.response_snippet])).toEqual([
          [1, 500, "the receiver answered 500", "boom"],
          [2, 200, null, "ok"]
        ])

        const goneWebhook = yield* hub.request("GET", `/api/webhooks/${goneHook.id}`, { token: tenant.instanceToken })
        expect(goneWebhook.body).toMatchObject({ active: false, disabled_reason: "gone_410" })
        const [goneDelivery] = yield* untilDeliveries(tenant, goneHook.id, "dead", (d) => d[0]?.status === "dead")
        expect(goneDelivery).toMatchObject({ attempts: 1, last_status_code: 410 })

        const [slowDelivery] = yield* untilDeliveries(
          tenant,
          slowHook.id,
          "dead after retries",
          (d) => d[0]?.status === "dead"
        )
        expect(slowDelivery).toMatchObject({
          attempts: 3,
          last_status_code: null,
          last_error: `no answer within ${TIMEOUT_MS} ms`
        })
        expect(slowDelivery?.attempt_log.map((a) => [a.status_code, a.error])).toEqual(
          Array.from({ length: 3 }, () => [null, `no answer within ${TIMEOUT_MS} ms`])
        )
        expect(slow.distinctIds().size).toBe(1)

        // The disabled webhook gets nothing more; the others get the next event.
        const second = yield* postEvent(tenant)
        expect(second.answer).toMatchObject({ deliveries: 2 })
        const [, , third] = yield* flaky.waitFor("the next event", (r) => r.length === 3)
        expect(verify(flakyHook.secret, third)).toEqual(second.payload)
        yield* slow.waitFor("the next event", (r) => r.length === 4)
        expect(gone.requests.length).toBe(1)
        expect((yield* deliveries(tenant, goneHook.id)).body.total).toBe(1)
      }))

    it.scoped("every delivery carries the Standard Webhooks headers and verifies with the standardwebhooks package", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const hook = yield* createWebhook(tenant, receiver.url)
        const { payload } = yield* postEvent(tenant)
        const [request] = yield* receiver.waitFor("the delivery", (r) => r.length === 1)
        expect(request?.headers["content-type"]).toBe("application/json")
        expect(request?.headers["user-agent"]).toMatch(/^MessagingHub-Webhooks\//)
        expect(request?.headers["webhook-id"]).toMatch(/^msg_/)
        expect(Math.abs(Number(request?.headers["webhook-timestamp"]) - Date.now() / 1000)).toBeLessThan(60)
        expect(request?.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
        expect(verify(hook.secret, request)).toEqual(payload)
        const other = new Webhook(`whsec_${Buffer.alloc(24, 1).toString("base64")}`)
        expect(() => other.verify(request?.body ?? "", request?.headers ?? {})).toThrow("No matching signature found")
        const tampered = { ...request?.headers, "webhook-id": "msg_other" }
        expect(() => new Webhook(hook.secret).verify(request?.body ?? "", tampered)).toThrow()
      }))

    it.scoped("after a rotation both the old and the new secret verify, as the Standard Webhooks spec allows", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const hook = yield* createWebhook(tenant, receiver.url)
        yield* postEvent(tenant)
        const [before] = yield* receiver.waitFor("a delivery before rotation", (r) => r.length === 1)
        expect(before?.headers["webhook-signature"]?.split(" ").length).toBe(1)

        const rotated = yield* hub.request("POST", `/api/webhooks/${hook.id}/rotate-secret`, {
          token: tenant.instanceToken
        })
        const newSecret = String(rotated.body.secret)
        const { payload } = yield* postEvent(tenant)
        const [, after] = yield* receiver.waitFor("a delivery after rotation", (r) => r.length === 2)
        const signatures = after?.headers["webhook-signature"]?.split(" ") ?? []
        expect(signatures.length).toBe(2)
        expect(signatures.every((s) => s.startsWith("v1,"))).toBe(true)
        expect(verify(newSecret, after)).toEqual(payload)
        expect(verify(hook.secret, after)).toEqual(payload)
        expect(() => verify(newSecret, before)).toThrow()

        // Once both keys are known (decrypted once each), later deliveries are signed with both too.
        const { payload: later } = yield* postEvent(tenant)
        const [, , third] = yield* receiver.waitFor("a second delivery after rotation", (r) => r.length === 3)
        expect(third?.headers["webhook-signature"]?.split(" ").length).toBe(2)
        expect(verify(newSecret, third)).toEqual(later)
        expect(verify(hook.secret, third)).toEqual(later)
      }))

    it.scoped("replay: a dead delivery and a delivered one are sent again with the same webhook-id", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver((_, index) => (index < 3 ? { status: 500 } : { status: 204 }))
        const hook = yield* createWebhook(tenant, receiver.url)
        yield* postEvent(tenant)
        const [dead] = yield* untilDeliveries(tenant, hook.id, "dead", (d) => d[0]?.status === "dead")
        expect(dead?.attempts).toBe(3)
        const retry = (id: string | undefined) =>
          hub.request("POST", `/api/webhooks/${hook.id}/deliveries/${id}/retry`, { token: tenant.orgToken })

        const replayed = yield* retry(dead?.id)
        expect(replayed.status).toBe(200)
        expect(replayed.body).toMatchObject({
          id: dead?.id,
          status: "pending",
          attempts: 3,
          message_id: dead?.message_id
        })
        yield* receiver.waitFor("the replay", (r) => r.length === 4)
        const [succeeded] = yield* untilDeliveries(tenant, hook.id, "success", (d) => d[0]?.status === "succeeded")
        expect(succeeded?.attempts).toBe(4)
        expect(succeeded?.attempt_log.map((a) => a.status_code)).toEqual([500, 500, 500, 204])

        expect((yield* retry(dead?.id)).status).toBe(200)
        yield* receiver.waitFor("a second replay", (r) => r.length === 5)
        yield* untilDeliveries(
          tenant,
          hook.id,
          "five attempts",
          (d) => d[0]?.status === "succeeded" && d[0].attempts === 5
        )
        expect(receiver.distinctIds()).toEqual(new Set([dead?.message_id]))

        const unknown = yield* retry("dlv_unknown")
        expect(unknown.status).toBe(404)
        expect(unknown.body).toMatchObject({ message: "delivery dlv_unknown was not found" })
        yield* hub.request("PATCH", `/api/webhooks/${hook.id}`, { token: tenant.orgToken, json: { active: false } })
        const inactive = yield* retry(dead?.id)
        expect(inactive.status).toBe(409)
        expect(inactive.body).toMatchObject({ statusCode: 409, error: "webhook_inactive" })
      }))

    it.scoped("deliveries to a receiver go over one kept-alive connection, each signed", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const receiver = yield* rawReceiver(() => ({ bytes: OK }))
        const hook = yield* createWebhook(tenant, `http://127.0.0.1:${receiver.port}/hooks`)
        for (let i = 1; i <= 5; i++) {
          yield* postEvent(tenant)
          yield* untilDeliveries(tenant, hook.id, `${i} delivered`, (d) =>
            d.length === i && d.every((x) =>
              x.status === "succeeded"
            ))
        }
        expect(receiver.requests.map((r) =>
          r.connection
        )).toEqual([0, 0, 0, 0, 0])
        expect(receiver.connections()).toBe(1)
        for (const request of receiver.requests) {
          const headers = Object.fromEntries(
            request.head.split("\r\n").slice(1).map((line) => {
              const colon = line.indexOf(":")
              return [line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim()]
            })
          )
          expect(request.head.split("\r\n")[0]).toBe("POST /hooks HTTP/1.1")
          expect(verify(hook.secret, { path: "/hooks", headers, body: request.body })).toMatchObject({
            object: "whatsapp_business_account"
          })
        }
      }))

    it.scoped("redirects are not followed and count as failures", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const target = yield* makeReceiver()
        const redirecting = yield* makeReceiver(() => ({ status: 307, headers: { location: target.url } }))
        const hook = yield* createWebhook(tenant, redirecting.url)
        yield* postEvent(tenant)
        const [dead] = yield* untilDeliveries(tenant, hook.id, "dead", (d) => d[0]?.status === "dead")
        expect(
          dead?.attempt_log.map((a) => a.status_code)
        ).toEqual([307, 307, 307])
        expect(dead?.last_error).toContain("redirect")
        expect(redirecting.requests.length).toBe(3)
        expect(target.requests.length).toBe(0)
      }))

    it.scoped("Retry-After is honoured when longer than the schedule, in seconds or as a date, capped at 24 h", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const inOneHour = new Date(Date.now() + 3600_000).toUTCString()
        const cases = [["120", 120], [inOneHour, 3600], ["999999999", 86_400]] as const
        for (const [header, seconds] of cases) {
          const receiver = yield* makeReceiver((
            _,
            index
          ) => (index === 0 ? { status: 503, headers: { "retry-after": header } } : { status: 200 }))
          const hook = yield* createWebhook(tenant, receiver.url)
          yield* postEvent(tenant)
          const [failed] = yield* untilDeliveries(
            tenant,
            hook.id,
            "a scheduled retry",
            (d) => d[0]?.status === "failed"
          )
          const delay = (Date.parse(failed?.next_attempt_at ?? "") - Date.parse(failed?.updated_at ?? "")) / 1000
          expect(delay, header).toBeGreaterThanOrEqual(seconds - 2)
          expect(delay, header).toBeLessThanOrEqual(seconds + 1)
          expect(failed?.last_status_code).toBe(503)

          // A replay makes the waiting retry due at once.
          const replayed = yield* hub.request("POST", `/api/webhooks/${hook.id}/deliveries/${failed?.id}/retry`, {
            token: tenant.instanceToken
          })
          expect(replayed.body).toMatchObject({ status: "pending" })
          yield* receiver.waitFor("the early retry", (r) => r.length === 2)
          yield* untilDeliveries(tenant, hook.id, "success", (d) => d[0]?.status === "succeeded")
        }
      }))

    it.scoped("deactivating or deleting a webhook cancels its queued deliveries", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const later = () => ({ status: 503, headers: { "retry-after": "3600" } })
        const paused = yield* makeReceiver(later)
        const removed = yield* makeReceiver(later)
        const pausedHook = yield* createWebhook(tenant, paused.url)
        const removedHook = yield* createWebhook(tenant, removed.url)
        yield* postEvent(tenant)
        yield* untilDeliveries(tenant, pausedHook.id, "a scheduled retry", (d) => d[0]?.status === "failed")
        yield* untilDeliveries(tenant, removedHook.id, "a scheduled retry", (d) => d[0]?.status === "failed")

        yield* hub.request("PATCH", `/api/webhooks/${pausedHook.id}`, {
          token: tenant.instanceToken,
          json: { active: false }
        })
        const [cancelled] = deliveryViews((yield* deliveries(tenant, pausedHook.id)).body)
        expect(cancelled).toMatchObject({ status: "cancelled", next_attempt_at: null, attempts: 1 })

        expect(
          (yield* hub.request("DELETE", `/api/webhooks/${removedHook.id}`, { token: tenant.instanceToken })).status
        ).toBe(204)
        const rows = yield* sql<
          { readonly status: string }
        >`SELECT status FROM deliveries WHERE webhook_id = ${removedHook.id}`
        expect(rows.map((r) => r.status)).toEqual(["cancelled"])
        const next = yield* postEvent(tenant)
        expect(next.answer).toMatchObject({ deliveries: 0 })
      }))

    it.scoped("a webhook failing for days without a success is disabled; a success ends the failure streak", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const failing = yield* makeReceiver(() => ({ status: 500 }))
        const recovering = yield* makeReceiver()
        const failingHook = yield* createWebhook(tenant, failing.url)
        const recoveringHook = yield* createWebhook(tenant, recovering.url)
        const sixDaysAgo = new Date(Date.now() - 6 * 86_400_000).toISOString()
        yield* sql`UPDATE webhooks SET failing_since = ${sixDaysAgo} WHERE ${
          sql.in("id", [failingHook.id, recoveringHook.id])
        }`
        yield* postEvent(tenant)

        yield* failing.waitFor("an attempt", (r) => r.length >= 1)
        const [cancelled] = yield* untilDeliveries(
          tenant,
          failingHook.id,
          "cancelled",
          (d) => d[0]?.status === "cancelled"
        )
        expect(cancelled?.attempts).toBe(1)
        const disabled = yield* hub.request("GET", `/api/webhooks/${failingHook.id}`, { token: tenant.instanceToken })
        expect(disabled.body).toMatchObject({
          active: false,
          disabled_reason: "failing_too_long",
          failing_since: sixDaysAgo
        })

        yield* untilDeliveries(tenant, recoveringHook.id, "success", (d) => d[0]?.status === "succeeded")
        const streak = yield* sql<{ readonly failing_since: string | null; readonly active: number }>`
        SELECT failing_since, active FROM webhooks WHERE id = ${recoveringHook.id}`
        expect(streak).toEqual([{ failing_since: null, active: 1 }])
      }))

    it.scoped("at most HUB_DISPATCH_PER_WEBHOOK deliveries are in flight to one webhook", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver(() => ({ status: 200, delayMs: 60 }))
        yield* createWebhook(tenant, receiver.url)
        for (let i = 0; i < 6; i++) {
          yield* postEvent(tenant)
        }
        yield* receiver.waitFor("six deliveries", (r) => r.length === 6)
        expect(receiver.distinctIds().size).toBe(6)
        expect(receiver.maxConcurrent()).toBe(2)
      }))

    it.scoped("a new delivery that overtakes nothing queued is handed to the dispatcher and starts without being leased by a round", () =>
      Effect.gen(function*() {
        const handoff = yield* Handoff
        const dispatcher = handoff.intake()
        if (dispatcher === undefined) return yield* Effect.dieMessage("the dispatcher serves no hand-off")
        const adopted: Array<LeasedDelivery> = []
        // The dispatcher's own intake, watched.
        yield* handoff.serve({
          ...dispatcher,
          startCommitted: (handed) =>
            Effect.zipRight(Effect.sync(() => adopted.push(...handed)), dispatcher.startCommitted(handed))
        })
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const hook = yield* createWebhook(tenant, receiver.url)
        // After the first delivery a lease has come back short (the queue is known empty), whichever way it went.
        yield* postEvent(tenant)
        yield* receiver.waitFor("the first delivery", (r) => r.length === 1)
        yield* postEvent(tenant)
        const [, second] = yield* receiver.waitFor("the second delivery", (r) => r.length === 2)
        const handed = adopted.find((d) => d.message_id === second?.headers["webhook-id"])
        expect(handed).toMatchObject({
          webhook_id: hook.id,
          status: "pending",
          attempts: 0,
          url: receiver.url,
          body: second?.body
        })
        expect(verify(hook.secret, second)).toBeTruthy()
        const logged = yield* untilDeliveries(
          tenant,
          hook.id,
          "both logged",
          (d) => d.length === 2 && d.every((x) => x.status === "succeeded")
        )
        expect(logged.map((d) => d.attempt_log.map((a) => a.status_code))).toEqual([[200], [200]])
      }))

    it.scoped("the ingress writes an admitted delivery leased to the dispatcher with its event, hands it over before answering, and queues the rest", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const handoff = yield* Handoff
        const tenant = yield* seedTenant()
        const admittedReceiver = yield* makeReceiver()
        const queuedReceiver = yield* makeReceiver()
        const admittedHook = yield* createWebhook(tenant, admittedReceiver.url)
        const queuedHook = yield* createWebhook(tenant, queuedReceiver.url)
        const adopted: Array<LeasedDelivery> = []
        // An intake that never starts what it is handed, so the row stays as the ingress wrote it.
        yield* handoff.serve({
          owner: "test-intake",
          leaseMs: 60_000,
          admit: (webhookId) => webhookId === admittedHook.id,
          startCommitted: (handed) => Effect.sync(() => adopted.push(...handed)),
          releaseUncommitted: () => {}
        })
        const before = Date.now()
        yield* postEvent(tenant)
        expect(adopted.map((d) => d.webhook_id)).toEqual([admittedHook.id])
        // The queued row is leased by a round of the real dispatcher and sent.
        const [sent] = yield* queuedReceiver.waitFor("the queued delivery", (r) => r.length === 1)
        const rows = yield* sql<
          {
            readonly webhook_id: string
            readonly message_id: string
            readonly lease_owner: string | null
            readonly lease_expires_at: string | null
            readonly body: string
          }
        >`
        SELECT d.webhook_id, d.message_id, d.lease_owner, d.lease_expires_at, e.body FROM deliveries d JOIN events e ON e.id = d.event_id
         WHERE d.webhook_id IN (${admittedHook.id}, ${queuedHook.id})`
        const admittedRow = rows.find((r) => r.webhook_id === admittedHook.id)
        expect(admittedRow?.lease_owner).toBe("test-intake")
        expect(Date.parse(admittedRow?.lease_expires_at ?? "")).toBeGreaterThanOrEqual(before + 60_000)
        expect(adopted[0]).toMatchObject({
          id: expect.any(String),
          message_id: admittedRow?.message_id,
          body: admittedRow?.body,
          url: admittedReceiver.url
        })
        expect(sent?.body).toBe(admittedRow?.body)
        expect(rows.find((r) => r.webhook_id === queuedHook.id)?.lease_owner).not.toBe("test-intake")
        expect(admittedReceiver.requests).toEqual([])
      }))

    it.scoped("when the ingress's transaction fails after the dispatcher admitted its deliveries, their room is given back", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const hub = yield* TestHub
        const handoff = yield* Handoff
        const dispatcher = handoff.intake()
        if (dispatcher === undefined) return yield* Effect.dieMessage("the dispatcher serves no hand-off")
        const forgone: Array<LeasedDelivery> = []
        yield* handoff.serve({
          ...dispatcher,
          releaseUncommitted: (handed) => {
            forgone.push(...handed)
            dispatcher.releaseUncommitted(handed)
          }
        })
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const hook = yield* createWebhook(tenant, receiver.url)
        // After the first delivery a lease has come back short: new deliveries to this webhook are admitted.
        yield* postEvent(tenant)
        yield* receiver.waitFor("the first delivery", (r) => r.length === 1)
        // As if the disk filled up: the delivery rows cannot be written, after the dispatcher admitted them.
        const dropTrigger = sql.onDialectOrElse({
          pg: () => sql.unsafe("DROP TRIGGER IF EXISTS refuse_deliveries ON deliveries"),
          orElse: () => sql.unsafe("DROP TRIGGER IF EXISTS refuse_deliveries")
        })
        yield* Effect.acquireRelease(
          sql.onDialectOrElse({
            pg: () =>
              Effect.zipRight(
                sql.unsafe(`CREATE FUNCTION refuse_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'database or disk is full'; END $$`),
                sql.unsafe(`CREATE TRIGGER refuse_deliveries BEFORE INSERT ON deliveries FOR EACH ROW
                WHEN (NEW.webhook_id = '${hook.id}') EXECUTE FUNCTION refuse_deliveries()`)
              ),
            orElse: () =>
              sql.unsafe(
                `CREATE TRIGGER refuse_deliveries BEFORE INSERT ON deliveries WHEN NEW.webhook_id = '${hook.id}'
              BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`
              )
          }),
          () => Effect.orDie(dropTrigger)
        )
        // As many as the webhook's share (2 here): were their room kept, nothing more could start.
        for (let i = 0; i < 2; i++) {
          const failed = yield* hub.request("POST", "/upstream/events", {
            json: envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
          })
          // The trigger's refusal is the statement's fault, not a database gone: a 500 (a disk really full is
          // a 503 with Retry-After: test/database-outage.test.ts).
          expect(failed.status).toBe(500)
        }
        expect(forgone.map((d) => d.webhook_id)).toEqual([hook.id, hook.id])
        yield* dropTrigger
        yield* postEvent(tenant)
        yield* receiver.waitFor("the next delivery", (r) => r.length === 2)
        const stored = yield* sql<
          { readonly n: number }
        >`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM deliveries WHERE webhook_id = ${hook.id}`
        expect(stored[0]?.n).toBe(2)
      }))

    it.scoped("the delivery log pages, filters by status, validates its query and keeps 1 KB of each answer", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver(() => ({ status: 200, body: "y".repeat(5000) }))
        const hook = yield* createWebhook(tenant, receiver.url)
        for (let i = 0; i < 3; i++) yield* postEvent(tenant)
        const all = yield* untilDeliveries(
          tenant,
          hook.id,
          "three successes",
          (d) => d.length === 3 && d.every((x) => x.status === "succeeded")
        )
        expect(all[0]?.attempt_log[0]?.response_snippet).toBe("y".repeat(1024))

        const firstPage = yield* deliveries(tenant, hook.id, "?limit=2")
        expect(firstPage.body).toMatchObject({ total: 3, page: 1, limit: 2 })
        const secondPage = yield* deliveries(tenant, hook.id, "?limit=2&page=2")
        expect(secondPage.body).toMatchObject({ total: 3, page: 2, limit: 2 })
        const ids = [...deliveryViews(firstPage.body), ...deliveryViews(secondPage.body)].map((d) => d.id)
        expect(ids).toEqual(all.map((d) => d.id))
        expect((yield* deliveries(tenant, hook.id, "?status=succeeded")).body.total).toBe(3)
        expect((yield* deliveries(tenant, hook.id, "?status=dead")).body).toMatchObject({ total: 0, data: [] })

        const invalid = yield* deliveries(tenant, hook.id, "?limit=0&page=x&status=bogus")
        expect(invalid.status).toBe(400)
        expect(itemsOf(invalid.body, "details").map((d) => String(d.field)).sort()).toEqual(["limit", "page", "status"])
      }))
  })
}

layer(
  testHub({
    upstream: "graph",
    secretKey: Option.some(Redacted.make(new Uint8Array(32).fill(9))),
    webhookRetry: [Duration.millis(10)]
  }),
  { excludeTestServices: true }
)("delivery-time address check outside the sandbox", (it) => {
  it.scoped("a stored URL that now reaches a private address is refused at delivery, and nothing is sent", () =>
    Effect.gen(function*() {
      const repo = yield* WebhooksRepo
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver()
      // As if the host's DNS answer changed after registration: the stored URL reaches loopback.
      const webhook = yield* repo.create({
        organizationId: tenant.organizationId,
        instanceId: tenant.instanceId,
        name: "rebound",
        url: receiver.url,
        secret: `whsec_${Buffer.alloc(24, 2).toString("base64")}`
      })
      yield* postEvent(tenant)
      const [dead] = yield* untilDeliveries(tenant, webhook.id, "dead", (d) => d[0]?.status === "dead")
      expect(dead?.attempts).toBe(2)
      expect(dead?.last_error).toBe(
        "127.0.0.1 is not a public address (loopback); webhooks must reach a public address"
      )
      expect(receiver.requests.length).toBe(0)
    }))
})

layer(
  testHub({
    webhookTimeout: Duration.millis(TIMEOUT_MS),
    // Deliveries waiting for the one connection may time out while they wait: enough quick retries for each.
    webhookRetry: Array.from({ length: 8 }, () => Duration.millis(10)),
    dispatchPerWebhook: 4,
    maxConnectionsPerOrigin: 1
  }),
  { excludeTestServices: true }
)("connections per receiver", (it) => {
  it.scoped("deliveries to one receiver use at most HUB_MAX_CONNECTIONS_PER_ORIGIN connections; the others wait their turn", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      // The first two requests hang until their timeout: uncapped, the deliveries posted at once would each
      // open a connection (four at a time, HUB_DISPATCH_PER_WEBHOOK), the hung ones staying open.
      const receiver = yield* rawReceiver((_request, index) => (index < 2 ? "hang" : { bytes: OK }))
      const hook = yield* createWebhook(tenant, `http://127.0.0.1:${receiver.port}/hooks`)
      yield* Effect.all(Array.from({ length: 4 }, () => postEvent(tenant)), { concurrency: "unbounded" })
      yield* untilDeliveries(
        tenant,
        hook.id,
        "4 delivered",
        (d) => d.length === 4 && d.every((x) => x.status === "succeeded")
      )
      // Capped at one, the receiver sees at most two at once (a hung connection's close may reach it a
      // moment after the hub let it go and opened the next). How many were opened over time is not the
      // bound: a delivery whose deadline ends as its turn comes may have opened one that is then closed.
      expect(receiver.peakConnections()).toBeLessThanOrEqual(2)
      expect(receiver.requests.length).toBeGreaterThanOrEqual(6)
    }))
})

/** How many of this webhook's rows are leased (handed over by the ingress, or leased by a round). */
const leasedRows = (webhookId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.map(
      sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM deliveries
        WHERE webhook_id = ${webhookId} AND lease_owner IS NOT NULL`,
      (rows) => Number(rows[0]?.n)
    ))

/** Two events posted and delivered to this webhook, answered at once: its receiver is quick from then on (ReceiverPace.ts). */
const deliveredQuickly = (tenant: Tenant, webhookId: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2; i++) yield* postEvent(tenant)
    yield* untilDeliveries(
      tenant,
      webhookId,
      "the first two delivered",
      (d) => d.length === 2 && d.every((x) => x.status === "succeeded")
    )
  })

/** Until this many leased rows wait in memory for a slot at their receivers (hub_dispatch_waiting). */
const untilWaiting = (n: number) =>
  Effect.gen(function*() {
    const metrics = yield* scrape()
    if (metrics.value("hub_dispatch_waiting") !== n) {
      return yield* Effect.fail(`waiting ${metrics.value("hub_dispatch_waiting")}`)
    }
  }).pipe(Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 250 }), Effect.orDie)

/**
 * A receiver that holds each request (after the first `answeredAtOnce`) until the test lets it go
 * (`answer(index)`), or answers at once after `openAll` (and once the test's scope closes).
 */
const heldReceiver = (answeredAtOnce = 0) =>
  Effect.gen(function*() {
    const held: Array<ReturnType<typeof Promise.withResolvers<void>>> = []
    const hold = (index: number) => (held[index] ??= Promise.withResolvers<void>())
    let open = false
    const receiver = yield* makeReceiver((_, index) =>
      open || index < answeredAtOnce ? { status: 200 } : hold(index).promise.then(() => ({ status: 200 }))
    )
    const openAll = () => {
      open = true
      for (const h of held) h?.resolve()
    }
    // Released before the receiver closes, so that no attempt is left hanging when the test ends.
    yield* Effect.addFinalizer(() => Effect.sync(openAll))
    return { receiver, answer: (index: number) => hold(index).resolve(), openAll }
  })

for (const engine of engines) {
  layer(
    testHub({
      engine,
      webhookTimeout: Duration.seconds(10),
      dispatchConcurrency: 4,
      dispatchPerWebhook: 2,
      dispatchPerOrganization: 4
    }),
    { excludeTestServices: true }
  )(`slots taken in turn (${engine})`, (it) => {
    it.scoped("with every slot taken, a webhook whose rows began waiting last gets the next slot its turn gives it", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const a = yield* heldReceiver()
        const b = yield* heldReceiver()
        const quick = yield* makeReceiver()
        yield* createWebhook(tenant, a.receiver.url)
        yield* createWebhook(tenant, b.receiver.url)
        // whk a and whk b take the four slots overall (two each), four more rows each waiting.
        for (let i = 0; i < 6; i++) yield* postEvent(tenant)
        yield* a.receiver.waitFor("a's share", (r) => r.length === 2)
        yield* b.receiver.waitFor("b's share", (r) => r.length === 2)
        const late = yield* createWebhook(tenant, quick.url)
        yield* postEvent(tenant)
        // a and b five waiting each, the new webhook's row one more.
        yield* untilWaiting(11)
        a.answer(0)
        yield* a.receiver.waitFor("a's third", (r) => r.length === 3)
        a.answer(1)
        // The slot a freed again goes to the webhook whose turn it is, not to a's fourth row.
        const [row] = yield* quick.waitFor("the new webhook's row", (r) => r.length === 1)
        expect(row?.headers["webhook-id"]).toBeDefined()
        expect(a.receiver.requests.length).toBe(3)
        expect(b.receiver.requests.length).toBe(2)
        a.openAll()
        b.openAll()
        yield* untilDeliveries(tenant, late.id, "the new webhook's row logged", (d) => d[0]?.status === "succeeded")
      }))
  })
}

for (const engine of engines) {
  layer(
    testHub({
      engine,
      webhookTimeout: Duration.seconds(10),
      dispatchConcurrency: 6,
      dispatchPerWebhook: 2,
      dispatchPerOrganization: 64
    }),
    { excludeTestServices: true }
  )(`deep hand-off beside slower webhooks (${engine})`, (it) => {
    it.scoped("a quick webhook's rows beyond the lease's room do not make another webhook's rows, or its own, queue", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        // The quick one answers its first two at once; then both hold every request until released.
        const quick = yield* heldReceiver(2)
        const slow = yield* heldReceiver()
        const quickHook = yield* createWebhook(tenant, quick.receiver.url)
        const slowHook = yield* createWebhook(tenant, slow.receiver.url)
        yield* deliveredQuickly(tenant, quickHook.id)
        yield* slow.receiver.waitFor("the slow webhook's share", (r) => r.length === 2)
        for (let i = 0; i < 20; i++) yield* postEvent(tenant)
        // The lease's room is 24 rows (4 × 6), 8 a webhook. The quick webhook holds 20, all handed over
        // (up to 32 × 2); the slow one its 8, the rest queued behind them. Before, the quick rows
        // filled the lease's room, a slow row then queued for want of room overall, and every row
        // after it queued too: the quick webhook's as well (16 of its 20 handed over).
        expect(yield* leasedRows(quickHook.id)).toBe(20)
        expect(yield* leasedRows(slowHook.id)).toBe(8)
        quick.openAll()
        slow.openAll()
        yield* untilAttemptsLogged(
          "all 44 delivered",
          sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM deliveries
            WHERE webhook_id IN (${quickHook.id}, ${slowHook.id}) AND status = 'succeeded'`,
          (rows) => Number(rows[0]?.n) === 44
        )
        expect(quick.receiver.maxConcurrent()).toBe(2)
        expect(slow.receiver.maxConcurrent()).toBe(2)
      }))
  })
}

for (const engine of engines) {
  layer(
    testHub({ engine, webhookTimeout: Duration.seconds(10), dispatchPerWebhook: 2 }),
    { excludeTestServices: true }
  )(`leasing ahead (${engine})`, (it) => {
    it.scoped("the dispatcher takes four times a webhook's share ahead; the receiver still sees the share at once", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const { receiver, openAll } = yield* heldReceiver()
        const hook = yield* createWebhook(tenant, receiver.url)
        for (let i = 0; i < 10; i++) yield* postEvent(tenant)
        yield* receiver.waitFor("the webhook's share at the receiver", (r) => r.length === 2)
        // Eight (4 × 2) are this process's: two at the receiver and six waiting their turn in memory,
        // written leased by the ingress that admitted them; the last two wait in the queue.
        expect(yield* leasedRows(hook.id)).toBe(8)
        expect(receiver.requests.length).toBe(2)
        const metrics = yield* scrape()
        expect(metrics.value("hub_outbox_deliveries", { state: "leased" })).toBe(8)
        expect(metrics.value("hub_dispatch_waiting")).toBe(6)
        openAll()
        yield* untilDeliveries(
          tenant,
          hook.id,
          "all ten delivered",
          (d) => d.length === 10 && d.every((x) => x.status === "succeeded")
        )
        expect(receiver.distinctIds().size).toBe(10)
        expect(receiver.maxConcurrent()).toBe(2)
      }))

    it.scoped("once its receiver has answered quickly, the ingress hands over thirty-two times the webhook's share", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        // The first two answer at once (the receiver is quick); the rest wait for the release.
        const { receiver, openAll } = yield* heldReceiver(2)
        const hook = yield* createWebhook(tenant, receiver.url)
        yield* deliveredQuickly(tenant, hook.id)
        for (let i = 0; i < 70; i++) yield* postEvent(tenant)
        yield* receiver.waitFor("the webhook's share at the receiver", (r) => r.length === 4)
        // 64 (32 × 2) written leased by the ingress: two at the receiver, 62 waiting in memory; the last
        // six queued (a slow receiver's webhook gets 8, the test above).
        expect(yield* leasedRows(hook.id)).toBe(64)
        openAll()
        yield* untilAttemptsLogged(
          "all 72 delivered",
          sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM deliveries
            WHERE webhook_id = ${hook.id} AND status = 'succeeded'`,
          (rows) => Number(rows[0]?.n) === 72
        )
        expect(receiver.distinctIds().size).toBe(72)
        expect(receiver.maxConcurrent()).toBe(2)
      }))
  })
}

describe("retry policy", () => {
  const schedule = [Duration.seconds(5), Duration.seconds(30)]
  const failed = {
    attempt: 1,
    finalAttempt: null,
    schedule,
    statusCode: 500,
    retryAfterSeconds: undefined,
    nowMs: 0,
    random: 0.5
  }
  const delayOf = (
    result: ReturnType<typeof afterFailure>
  ) => (result._tag === "RetryAt" ? Date.parse(result.at) : undefined)

  plain(
    "delays follow the schedule with ±20 % jitter; after the last delay, on 410 or past a replay's attempt, the delivery is dead",
    () => {
      expect(delayOf(afterFailure(failed))).toBe(5000)
      expect(delayOf(afterFailure({ ...failed, random: 0 }))).toBe(4000)
      expect(delayOf(afterFailure({ ...failed, random: 0.999999 }))).toBeCloseTo(6000, -1)
      expect(delayOf(afterFailure({ ...failed, attempt: 2 }))).toBe(30_000)
      expect(afterFailure({ ...failed, attempt: 3 })).toEqual({ _tag: "Dead" })
      expect(afterFailure({ ...failed, statusCode: 410 })).toEqual({ _tag: "Dead" })
      expect(afterFailure({ ...failed, attempt: 4, finalAttempt: 4 })).toEqual({ _tag: "Dead" })
      expect(delayOf(afterFailure({ ...failed, retryAfterSeconds: 60 }))).toBe(60_000)
      expect(delayOf(afterFailure({ ...failed, retryAfterSeconds: 1 }))).toBe(5000)
    }
  )

  plain("Retry-After is read as seconds or an HTTP date, capped at 24 h; anything else is ignored", () => {
    const now = Date.parse("2026-01-01T00:00:00Z")
    expect(parseRetryAfter("120", now)).toBe(120)
    expect(parseRetryAfter("Thu, 01 Jan 2026 01:00:00 GMT", now)).toBe(3600)
    expect(parseRetryAfter("Wed, 31 Dec 2025 23:00:00 GMT", now)).toBe(0)
    expect(parseRetryAfter("99999999", now)).toBe(86_400)
    expect(parseRetryAfter("soon", now)).toBeUndefined()
    expect(parseRetryAfter(null, now)).toBeUndefined()
    // The two obsolete date forms a recipient must accept too; a second into the next is a whole second.
    expect(parseRetryAfter("Thursday, 01-Jan-26 01:00:00 GMT", now)).toBe(3600)
    expect(parseRetryAfter("Thu Jan  1 01:00:00 2026", now)).toBe(3600)
    expect(parseRetryAfter(" 30 ", now)).toBe(30)
    expect(parseRetryAfter("Thu, 01 Jan 2026 00:00:00 GMT", now - 500)).toBe(1)
    // What Date.parse would take for a date is not an HTTP date, nor a number with a sign or a fraction.
    for (
      const unreadable of [
        "Jan 2026",
        "2026-01-01T01:00:00Z",
        "-5",
        "1.5",
        "+7",
        "Thu, 32 Jan 2026 01:00:00 GMT",
        "Thu, 01 Jan 2026 01:00:00 UTC",
        ""
      ]
    ) {
      expect(parseRetryAfter(unreadable, now)).toBeUndefined()
    }
  })
})

for (const engine of engines) {
  describe(`outbox leases (${engine})`, () => {
    const seed = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      yield* seedOutboxParents(["whk_a", "whk_b"])
      const at = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString()
      const delivery = (
        id: string,
        webhook: string,
        status: string,
        next: string,
        lease: { owner: string; until: string } | undefined
      ) => ({
        ...deliveryRow(id, webhook),
        status,
        attempts: status === "failed" ? 2 : 0,
        next_attempt_at: next,
        lease_owner: lease?.owner ?? null,
        lease_expires_at: lease?.until ?? null
      })
      yield* sql`INSERT INTO deliveries ${
        sql.insert([
          delivery("old_retry", "whk_a", "failed", at(-3600_000), undefined),
          delivery("fresh", "whk_a", "pending", at(-10), undefined),
          delivery("fresh_b", "whk_b", "pending", at(-20), undefined),
          delivery("future_retry", "whk_a", "failed", at(3600_000), undefined),
          delivery("held", "whk_a", "pending", at(-5000), { owner: "other", until: at(60_000) }),
          delivery("crashed", "whk_a", "pending", at(-6000), { owner: "dead-process", until: at(-1000) })
        ])
      }`
    })

    /** The rows "me" leases now, within the shares given. */
    const leaseRows = (limit: number, inFlight: ReadonlyMap<string, number> = new Map(), perWebhook = 10) =>
      Effect.flatMap(OutboxRepo, (outbox) => {
        const now = Date.now()
        return outbox.lease({
          owner: "me",
          now: new Date(now).toISOString(),
          leaseUntil: new Date(now + 60_000).toISOString(),
          limit,
          perWebhook,
          inFlight,
          perOrganization: 1_000,
          inFlightByOrganization: new Map(),
          overShareRoom: 0
        })
      })
    /** Their ids. */
    const lease = (limit: number, inFlight: ReadonlyMap<string, number> = new Map(), perWebhook = 10) =>
      leaseRows(limit, inFlight, perWebhook).pipe(Effect.map((rows) => rows.map((r) => r.id)))

    const outboxLayer = OutboxRepo.Default.pipe(Layer.provideMerge(testDatabase(engine)))

    plain.effect(
      "first attempts go before retries; expired leases are taken again, live ones and future retries are not",
      () =>
        Effect.gen(function*() {
          yield* seed
          expect(yield* lease(2)).toEqual(["crashed", "fresh_b"])
          // A webhook with all its share in flight gets nothing.
          expect(yield* lease(10, new Map([["whk_b", 10]]))).toEqual(["fresh", "old_retry"])
          expect(yield* lease(10)).toEqual([])
          const outbox = yield* OutboxRepo
          yield* outbox.release("me", ["fresh"])
          expect(yield* lease(10)).toEqual(["fresh"])
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "each leased row carries its body: its own (a filtered webhook's), or its event's",
      () =>
        Effect.gen(function*() {
          yield* seedOutboxParents(["whk_a", "whk_b"])
          const sql = yield* SqlClient.SqlClient
          const now = new Date().toISOString()
          yield* sql`INSERT INTO events ${
            sql.insert({ id: "evt_2", instance_id: "ins_1", body: "{\"event\":2}", change_count: 1, received_at: now })
          }`
          yield* sql`INSERT INTO deliveries ${
            sql.insert([
              deliveryRow("own_1", "whk_b", "evt_1", "{\"own\":1}"),
              deliveryRow("shared_1", "whk_a", "evt_1"),
              deliveryRow("shared_2a", "whk_a", "evt_2"),
              deliveryRow("shared_2b", "whk_b", "evt_2")
            ])
          }`
          const leased = yield* leaseRows(10)
          expect(Object.fromEntries(leased.map((r) => [r.id, r.body]))).toEqual({
            own_1: "{\"own\":1}",
            shared_1: "{}",
            shared_2a: "{\"event\":2}",
            shared_2b: "{\"event\":2}"
          })
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "rows cancelled while leased leave the leases' index: an expired lease behind many of them is still taken",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          const longAgo = new Date(Date.now() - 50_000).toISOString()
          // Cancelled in flight (a webhook deleted): no next attempt, its lease left as it was, expired
          // before the crashed row's. More of them than the expired read's bound for two rows.
          yield* sql`INSERT INTO deliveries ${
            sql.insert(Array.from({ length: 20 }, (_, i) => ({
              ...deliveryRow(`gone_${i}`, "whk_b"),
              status: "cancelled",
              attempts: 1,
              next_attempt_at: null,
              lease_owner: "dead-process",
              lease_expires_at: longAgo
            })))
          }`
          expect(yield* lease(2)).toEqual(["crashed", "fresh_b"])
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "each webhook gets only what its share leaves, so a round never takes rows it cannot start",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          const now = new Date().toISOString()
          const due = (i: number) => new Date(Date.now() - 1000 + i).toISOString()
          yield* sql`INSERT INTO deliveries ${
            sql.insert(["a1", "a2", "a3", "b1", "a4", "b2", "b3"].map((id, i) => ({
              id,
              webhook_id: id.startsWith("a") ? "whk_a" : "whk_b",
              event_id: "evt_1",
              message_id: `msg_${id}`,
              status: "pending",
              attempts: 0,
              next_attempt_at: due(i),
              created_at: now,
              updated_at: now
            })))
          }`
          // Share 3: whk_a has one attempt in flight, so two of its rows; whk_b three; oldest first, first attempts before retries.
          expect(yield* lease(10, new Map([["whk_a", 1]]), 3)).toEqual(["crashed", "a1", "b1", "b2", "b3"])
          // The rows left behind are still due, for the next round: whk_a's `fresh` would be its fourth.
          expect(yield* lease(10, new Map(), 3)).toEqual(["a2", "a3", "a4", "fresh_b"])
          // A limit below the shares still takes the oldest rows first.
          yield* Effect.flatMap(OutboxRepo, (outbox) => outbox.release("me", "all"))
          expect(yield* lease(2, new Map(), 3)).toEqual(["crashed", "a1"])
        }).pipe(Effect.provide(outboxLayer))
    )

    /** `count` due first attempts of one webhook, oldest first, `agoMs` before now and 1 ms apart. */
    const queue = (webhookId: string, prefix: string, count: number, agoMs: number) =>
      Effect.flatMap(SqlClient.SqlClient, (sql) => {
        const now = new Date().toISOString()
        return sql`INSERT INTO deliveries ${
          sql.insert(Array.from({ length: count }, (_, i) => ({
            id: `${prefix}${String(i).padStart(4, "0")}`,
            webhook_id: webhookId,
            event_id: "evt_1",
            message_id: `msg_${prefix}${i}`,
            status: "pending",
            attempts: 0,
            next_attempt_at: new Date(Date.now() - agoMs + i).toISOString(),
            created_at: now,
            updated_at: now
          })))
        }`
      })

    plain.effect(
      "a webhook out of share with a long queue at the front does not hide the other webhooks' rows",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          // Only this test's rows: the slow receiver's long queue is older than anything of whk_b.
          yield* sql`DELETE FROM deliveries`
          yield* queue("whk_a", "slow", 300, 60_000)
          yield* queue("whk_b", "fast", 3, 1_000)
          // whk_a has its whole share in flight: the 10 oldest rows are all its, yet whk_b's rows are leased.
          expect(yield* lease(10, new Map([["whk_a", 4]]), 4)).toEqual(["fast0000", "fast0001", "fast0002"])
          // With room for two more, whk_a's two oldest come first, then whk_b's (none left for it now).
          expect(yield* lease(10, new Map([["whk_a", 2]]), 4)).toEqual(["slow0000", "slow0001"])
          // The picks are exactly the oldest rows within each share, whatever the window held.
          yield* Effect.flatMap(OutboxRepo, (outbox) => outbox.release("me", "all"))
          expect(yield* lease(5, new Map(), 4)).toEqual(["slow0000", "slow0001", "slow0002", "slow0003", "fast0000"])
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "an organization past its share takes idle slots only after every organization within its share, and only as many as it may",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          yield* sql`DELETE FROM deliveries`
          const org2 = { organizationId: "org_2", instanceId: "ins_2", phoneNumberId: "3", wabaId: "4" }
          yield* addOrganization(org2)
          yield* addWebhooks(["whk_c"], org2)
          // org_1's queue is older than anything of org_2.
          yield* queue("whk_a", "a", 6, 60_000)
          yield* queue("whk_c", "c", 2, 30_000)
          const leaseFor = (
            limit: number,
            overShareRoom: number,
            inFlightByOrganization: ReadonlyMap<string, number> = new Map()
          ) =>
            Effect.flatMap(OutboxRepo, (outbox) =>
              outbox.lease({
                owner: "me",
                now: new Date().toISOString(),
                leaseUntil: new Date(Date.now() + 60_000).toISOString(),
                limit,
                perWebhook: 10,
                inFlight: new Map(),
                perOrganization: 3,
                inFlightByOrganization,
                overShareRoom
              })).pipe(Effect.map((rows) => rows.map((r) => r.id)))
          const releaseAll = Effect.flatMap(OutboxRepo, (outbox) => outbox.release("me", "all"))
          // Room for five: org_1 its share of three, then org_2's two, although org_1 may take idle slots and its rows are older.
          expect(yield* leaseFor(5, 5)).toEqual(["a0000", "a0001", "a0002", "c0000", "c0001"])
          yield* releaseAll
          // No idle slots to take: org_1 stops at its share whatever the room.
          expect(yield* leaseFor(10, 0)).toEqual(["a0000", "a0001", "a0002", "c0000", "c0001"])
          yield* releaseAll
          // Two idle slots: org_1 takes two past its share, in due order.
          expect(yield* leaseFor(10, 2)).toEqual(["a0000", "a0001", "a0002", "a0003", "a0004", "c0000", "c0001"])
          yield* releaseAll
          // org_1 already at its share: only org_2's rows, or one more of org_1's when one idle slot may be taken.
          expect(yield* leaseFor(10, 0, new Map([["org_1", 3]]))).toEqual(["c0000", "c0001"])
          yield* releaseAll
          expect(yield* leaseFor(10, 1, new Map([["org_1", 3]]))).toEqual(["a0000", "c0000", "c0001"])
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "looking past a long queue covers any number of webhooks (read in several statements)",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          yield* sql`DELETE FROM deliveries`
          const many = Array.from({ length: 300 }, (_, i) => `whk_m${String(i).padStart(3, "0")}`)
          yield* addWebhooks(many)
          yield* queue("whk_a", "slow", 2000, 60_000)
          for (const [i, id] of many.entries()) yield* queue(id, `m${String(i).padStart(3, "0")}_`, 1, 30_000 - i)
          // whk_a is at its share; the other 300 webhooks' rows all lie behind its queue.
          const leased = yield* lease(400, new Map([["whk_a", 4]]), 4)
          expect(leased).toHaveLength(300)
          expect(new Set(leased).size).toBe(300)
          expect(leased.some((id) => id.startsWith("slow"))).toBe(false)
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "attempts in flight at the front of the due order do not hide the queued rows behind them",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          yield* sql`DELETE FROM deliveries`
          const hooks = Array.from({ length: 10 }, (_, i) => `whk_f${i}`)
          yield* addWebhooks(hooks)
          // Each webhook has 8 attempts in flight (leased to this dispatcher), older than anything queued,
          // and none is at its share of 10: 80 rows in flight, more than the rows a lease of 2 may read
          // from the front. Its bound counts only rows it may take, so it reads past them.
          for (const [i, id] of hooks.entries()) {
            yield* queue(id, `flight${i}_`, 8, 60_000 - i * 10)
          }
          yield* sql`UPDATE deliveries SET lease_owner = 'me', lease_expires_at = ${
            new Date(Date.now() + 60_000).toISOString()
          }`
          yield* queue("whk_f0", "queued", 3, 30_000)
          const inFlight = new Map(hooks.map((id) => [id, 8]))
          expect(yield* lease(2, inFlight, 10)).toEqual(["queued0000", "queued0001"])
        }).pipe(Effect.provide(outboxLayer))
    )

    plain.effect(
      "two replicas leasing at once never take one row twice: the second takes the rows the first left, without waiting for it",
      () =>
        Effect.gen(function*() {
          yield* seed
          const sql = yield* SqlClient.SqlClient
          yield* sql`DELETE FROM deliveries`
          yield* queue("whk_a", "r", 10, 60_000)
          const leaseAs = (owner: string, limit: number) =>
            Effect.flatMap(OutboxRepo, (outbox) =>
              outbox.lease({
                owner,
                now: new Date().toISOString(),
                leaseUntil: new Date(Date.now() + 60_000).toISOString(),
                limit,
                perWebhook: 10,
                inFlight: new Map(),
                perOrganization: 1_000,
                inFlightByOrganization: new Map(),
                overShareRoom: 0
              })).pipe(Effect.map((rows) => rows.map((r) => r.id)))
          const ids = (from: number, to: number) =>
            Array.from({ length: to - from }, (_, i) => `r${String(from + i).padStart(4, "0")}`)
          // The first replica leases three in its round's transaction, held open (on PostgreSQL the
          // rows it took stay locked, uncommitted, so the second still reads them as free). A lease
          // that locked every row it read would leave the second nothing; one that waited on locked
          // rows would never return.
          const taken = yield* Deferred.make<ReadonlyArray<string>>()
          const done = yield* Deferred.make<void>()
          const first = yield* Effect.fork(sql.withTransaction(
            Effect.flatMap(leaseAs("one", 3), (rows) =>
              Effect.zipRight(
                Deferred.succeed(taken, rows),
                engine === "postgres" ? Deferred.await(done) : Effect.void
              ))
          ))
          expect(yield* Deferred.await(taken)).toEqual(ids(0, 3))
          if (engine === "sqlite") yield* Fiber.join(first)
          expect(yield* leaseAs("two", 10)).toEqual(ids(3, 10))
          yield* Deferred.succeed(done, undefined)
          yield* Fiber.join(first)
          // Committed: each row has the one owner that leased it, and a third lease finds none free.
          const owners = yield* sql<{ readonly id: string; readonly lease_owner: string }>`
            SELECT id, lease_owner FROM deliveries ORDER BY id`
          expect(owners).toEqual(ids(0, 10).map((id, i) => ({ id, lease_owner: i < 3 ? "one" : "two" })))
          expect(yield* leaseAs("three", 10)).toEqual([])
        }).pipe(Effect.provide(outboxLayer))
    )

    // SQLite's plans; PostgreSQL's planner chooses by statistics, which a test's few rows do not settle.
    if (engine === "sqlite") {
      plain.effect(
        "the lease reads webhooks' queues through indexes: no table scan, and no read past a queue",
        () =>
          Effect.gen(function*() {
            yield* seed
            const sql = yield* SqlClient.SqlClient
            const queries = leaseQueries(sql)
            const planOf = (statement: { readonly compile: () => readonly [string, ReadonlyArray<unknown>] }) =>
              Effect.map(
                sql.unsafe<{ readonly detail: string }>(
                  `EXPLAIN QUERY PLAN ${statement.compile()[0]}`,
                  statement.compile()[1]
                ),
                (rows) => rows.map((row) => row.detail)
              )
            const queued = yield* planOf(queries.queuedWebhooks(10))
            expect(
              queued.filter((step) => step.includes("deliveries") && !step.includes("INDEX deliveries_webhook_due"))
            ).toEqual([])
            // No table scan; the first seek is an ordered scan of the index that stops at its first row (LIMIT 1).
            expect(queued.filter((step) => /^SCAN (d|deliveries)\b/.test(step) && !step.includes(" INDEX "))).toEqual(
              []
            )
            expect((yield* queries.queuedWebhooks(10)).map((row) => row.webhook_id)).toEqual(["whk_a", "whk_b"])
            // The list stops at its bound (the lease then bounds its read by the limit alone).
            expect((yield* queries.queuedWebhooks(1)).map((row) => row.webhook_id)).toEqual(["whk_a"])

            const input = {
              owner: "me",
              now: new Date().toISOString(),
              leaseUntil: new Date().toISOString(),
              limit: 4,
              perWebhook: 2,
              inFlight: new Map<string, number>(),
              perOrganization: 4,
              inFlightByOrganization: new Map<string, number>(),
              overShareRoom: 0
            }
            // The front of the due order: free rows through deliveries_due (no row in flight to walk past),
            // expired leases through deliveries_leased; each read bounded, never a table scan.
            const front = (yield* planOf(queries.dueRows(input, 4))).filter((step) => /\bdeliveries\b/.test(step))
            expect(front).toEqual([
              expect.stringMatching(/^SEARCH deliveries USING INDEX deliveries_leased \(lease_expires_at<\?\)$/),
              expect.stringMatching(
                /^SEARCH deliveries USING INDEX deliveries_due \(status=\? AND next_attempt_at>\? AND next_attempt_at<\?\)$/
              ),
              expect.stringMatching(/^SEARCH deliveries USING INDEX deliveries_leased \(lease_expires_at<\?\)$/),
              expect.stringMatching(
                /^SEARCH deliveries USING INDEX deliveries_due \(status=\? AND next_attempt_at>\? AND next_attempt_at<\?\)$/
              )
            ])
            const perWebhook = yield* sql.unsafe<{ readonly detail: string }>(
              `EXPLAIN QUERY PLAN ${queries.dueOf(input, [["whk_b", 2]]).compile()[0]}`,
              queries.dueOf(input, [["whk_b", 2]]).compile()[1]
            )
            const searches = perWebhook.map((row) => row.detail).filter((step) => step.includes("deliveries"))
            expect(searches).toEqual([
              expect.stringMatching(
                /^SEARCH deliveries USING INDEX deliveries_webhook_due \(webhook_id=\? AND status=\? AND next_attempt_at<\?\)$/
              ),
              expect.stringMatching(
                /^SEARCH deliveries USING INDEX deliveries_webhook_due \(webhook_id=\? AND status=\? AND next_attempt_at<\?\)$/
              )
            ])
            expect((yield* queries.dueOf(input, [["whk_b", 2]])).map((row) => row.id)).toEqual(["fresh_b"])
            // The picked rows are leased by primary key (the UPDATE's WHERE, planned as a SELECT: EXPLAIN of a write leaves bun:sqlite's statement open).
            const take = yield* planOf(
              sql`SELECT id FROM deliveries WHERE ${queries.takeable(["fresh", "fresh_b", "old_retry"], input.now)}`
            )
            expect(take).toEqual([
              expect.stringMatching(/^SEARCH deliveries USING INDEX sqlite_autoindex_deliveries_1 \(id=\?\)$/)
            ])
          }).pipe(Effect.provide(outboxLayer))
      )
    }
  })
}

/**
 * A hub to stop and start again on one database (a file of its own on SQLite, removed with the
 * scope; a fresh database on PostgreSQL), with these settings; logs off.
 */
const restartableHub = (engine: Engine, overrides: Partial<HubSettings>) =>
  Effect.gen(function*() {
    const folder = mkdtempSync(join(tmpdir(), "hub-drain-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
    const settings = {
      databaseFile: engine === "sqlite" ? join(folder, "hub.sqlite") : yield* testDatabaseUrl(engine),
      secretKey: Option.some(Redacted.make(new Uint8Array(32).fill(5))),
      ...overrides
    }
    return TestHubLive.pipe(
      Layer.provideMerge(hubLayer(hubServer({ port: 0, hostname: "127.0.0.1" }))),
      Layer.provide(HostResolver.System),
      Layer.provideMerge(testHubConfig(settings)),
      Layer.provide(Logger.minimumLogLevel(LogLevel.None))
    )
  })

for (const engine of engines) {
  describe(`graceful shutdown (${engine})`, () => {
    // Live services: the drain bound and the receivers run on the real clock.
    plain.live(
      "in-flight deliveries finish, the rest are released and the next start sends them at once",
      () =>
        Effect.gen(function*() {
          const hub = yield* restartableHub(engine, {
            webhookTimeout: Duration.seconds(20),
            dispatchDrainTimeout: Duration.millis(300)
          })
          const answerQuick = yield* Deferred.make<void>()
          const quick = yield* makeReceiver(() =>
            Effect.runPromise(Deferred.await(answerQuick)).then(() => ({ status: 200 }))
          )
          const stuck = yield* makeReceiver((_, index) => (index === 0 ? "hang" : { status: 200 }))

          const firstScope = yield* Scope.make()
          const first = yield* Layer.buildWithScope(hub, firstScope)
          const tenant = yield* Effect.provide(seedTenant(), first)
          const quickHook = yield* Effect.provide(createWebhook(tenant, quick.url), first)
          const stuckHook = yield* Effect.provide(createWebhook(tenant, stuck.url), first)
          yield* Effect.provide(postEvent(tenant), first)
          yield* quick.waitFor("the quick delivery", (r) => r.length === 1)
          yield* stuck.waitFor("the stuck delivery", (r) => r.length === 1)

          const closing = yield* Effect.fork(Scope.close(firstScope, Exit.void))
          // The dispatcher turns the hub not ready as its drain begins: the quick receiver answers only then.
          yield* Effect.flatMap(Effect.provide(Readiness, first), (readiness) => readiness.whenDraining)
          yield* Deferred.succeed(answerQuick, undefined)
          yield* Fiber.join(closing)

          const second = yield* Layer.build(hub)
          const [quickDelivery] = yield* Effect.provide(
            untilDeliveries(tenant, quickHook.id, "kept", (d) => d.length === 1),
            second
          )
          expect(quickDelivery).toMatchObject({ status: "succeeded", attempts: 1 })
          // Released, not left leased: the restart sends it at once although its lease would have lasted 50 s.
          yield* stuck.waitFor("the resend after restart", (r) => r.length === 2)
          expect(stuck.distinctIds().size).toBe(1)
          const [stuckDelivery] = yield* Effect.provide(
            untilDeliveries(tenant, stuckHook.id, "success", (d) => d[0]?.status === "succeeded"),
            second
          )
          expect(stuckDelivery?.attempts).toBe(1)
          expect(quick.requests.length).toBe(1)
        }).pipe(Effect.scoped)
    )

    plain.live(
      "rows leased ahead and waiting their turn are not started once the hub stops, and are released for the next start",
      () =>
        Effect.gen(function*() {
          const hub = yield* restartableHub(engine, {
            // With the default lease margin (30 s), four times the shares leased ahead (Fairness.pipelineDepth).
            webhookTimeout: Duration.seconds(10),
            dispatchDrainTimeout: Duration.seconds(5),
            // One attempt at a time to the webhook: the others wait in memory, leased to the hub.
            dispatchPerWebhook: 1
          })
          const answerFirst = yield* Deferred.make<void>()
          const receiver = yield* makeReceiver((_, index) =>
            index === 0 ? Effect.runPromise(Deferred.await(answerFirst)).then(() => ({ status: 200 })) : { status: 200 }
          )
          const firstScope = yield* Scope.make()
          const first = yield* Layer.buildWithScope(hub, firstScope)
          const tenant = yield* Effect.provide(seedTenant(), first)
          const hook = yield* Effect.provide(createWebhook(tenant, receiver.url), first)
          for (let i = 0; i < 3; i++) yield* Effect.provide(postEvent(tenant), first)
          yield* receiver.waitFor("the first delivery, held", (r) => r.length === 1)
          const leased = (sql: SqlClient.SqlClient) =>
            sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM deliveries
              WHERE webhook_id = ${hook.id} AND lease_owner IS NOT NULL`.pipe(Effect.map((rows) => Number(rows[0]?.n)))
          // A row queued before the dispatcher's first lease is leased by its next round: all three soon.
          yield* Effect.provide(
            Effect.flatMap(SqlClient.SqlClient, leased).pipe(
              Effect.repeat({ schedule: Schedule.spaced("10 millis"), until: (n) => n === 3 }),
              Effect.timeout("10 seconds")
            ),
            first
          )

          // The first attempt ends while the hub drains: the two waiting behind it do not start then.
          const closing = yield* Effect.fork(Scope.close(firstScope, Exit.void))
          yield* Effect.flatMap(Effect.provide(Readiness, first), (readiness) => readiness.whenDraining)
          yield* Deferred.succeed(answerFirst, undefined)
          yield* Fiber.join(closing)
          expect(receiver.requests.length).toBe(1)

          const second = yield* Layer.build(hub)
          const sql = yield* Effect.provide(SqlClient.SqlClient, second)
          // Released, not left leased for their lease's 40 s: the restart sends the two at once.
          yield* receiver.waitFor("the two after restart", (r) => r.length === 3)
          expect(receiver.distinctIds().size).toBe(3)
          yield* Effect.provide(
            untilDeliveries(
              tenant,
              hook.id,
              "all three delivered",
              (d) => d.length === 3 && d.every((x) => x.status === "succeeded")
            ),
            second
          ).pipe(Effect.map((d) => expect(d.map((x) => x.attempts)).toEqual([1, 1, 1])))
          expect(yield* leased(sql)).toBe(0)
        }).pipe(Effect.scoped)
    )
  })
}

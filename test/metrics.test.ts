/**
 * GET /metrics through the real server: each counter moves by exactly what happened (a send and a
 * refused one, upstream posts with a duplicate and an unrouted change, deliveries that succeed, fail
 * and meet a 410 that disables their webhook), route labels are patterns, HUB_METRICS_TOKEN guards
 * the endpoint, and HUB_METRICS=false keeps nothing. The outbox's scrape-time read is checked for
 * its counts and for its plan (bounded reads through indexes, never a walk over the table).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Option, Redacted } from "effect"
import { outboxStateQueries } from "../src/Delivery/OutboxStates.js"
import { OUTBOX_COUNT_CAP } from "../src/Metrics/Metrics.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { sendMessage } from "./support/Messages.js"
import { scrape } from "./support/MetricsScrape.js"
import { makeReceiver } from "./support/Receivers.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { createWebhookId, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, META_MESSAGES } from "./support/UpstreamPayloads.js"

type Scrape = Effect.Effect.Success<ReturnType<typeof scrape>>

/** How much each named series moved between two scrapes. */
const moved = (before: Scrape, after: Scrape, name: string, labels: Readonly<Record<string, string>> = {}) =>
  after.value(name, labels) - before.value(name, labels)

/** Reads until `condition` holds of the webhook's record, again each time attempts are logged (the dispatcher disables it after logging its attempt). */
const untilWebhook = (
  tenant: Tenant,
  webhookId: string,
  condition: (body: Readonly<Record<string, unknown>>) => boolean
) =>
  untilAttemptsLogged(
    `webhook ${webhookId} got there`,
    Effect.flatMap(TestHub, (hub) => hub.request("GET", `/api/webhooks/${webhookId}`, { token: tenant.instanceToken })),
    (answer) => condition(answer.body)
  )

/** Reads until a webhook's only delivery has the status, again each time attempts are logged. */
const untilDelivery = (tenant: Tenant, webhookId: string, status: string) =>
  untilAttemptsLogged(
    `a ${status} delivery for ${webhookId}`,
    Effect.flatMap(TestHub, (hub) =>
      hub.request("GET", `/api/webhooks/${webhookId}/deliveries`, { token: tenant.instanceToken })),
    (answer) =>
      JSON.stringify(answer.body.data ?? []).includes(`"status":"${status}"`)
  )

const TEXT = { to: "16505551234", type: "text", text: { body: "hi" } }

// Graph mode against the fake upstream (the Graph call metrics), receivers on this machine, retries
// an hour apart (a failed delivery waits), and no app secret (upstream posts unsigned).
layer(testHubOnFakeGraph({ webhookRetry: [Duration.hours(1)], webhookAllowPrivate: true }), {
  excludeTestServices: true
})("metrics", (it) => {
  it.scoped("each counter moves by exactly what happened", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const stranger = { phoneNumberId: "399999999999999", wabaId: "499999999999999" }
      const fine = yield* makeReceiver(() => ({ status: 200 }))
      const failing = yield* makeReceiver(() => ({ status: 500 }))
      const gone = yield* makeReceiver(() => ({ status: 410 }))
      const fineHook = yield* createWebhookId(tenant, fine.url)
      const failingHook = yield* createWebhookId(tenant, failing.url)
      const goneHook = yield* createWebhookId(tenant, gone.url)
      const before = yield* scrape()

      // One send the upstream accepts, one it refuses.
      expect((yield* sendMessage(tenant.instanceToken, TEXT)).status).toBe(200)
      yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
        status: 400,
        body: { error: { message: "(#100) Invalid parameter", type: "OAuthException", code: 100, fbtrace_id: "AbC" } }
      })
      expect((yield* sendMessage(tenant.instanceToken, TEXT)).status).toBe(400)

      // A new inbound message (three deliveries), then a post with it again and a change for an unknown number.
      const change = inboundChange(tenant, META_MESSAGES.text)
      const first = yield* hub.request("POST", "/upstream/events", { json: envelope([tenant.wabaId, [change]]) })
      expect(first.body).toEqual({ changes: 1, accepted: 1, duplicates: 0, unrouted: 0, deliveries: 3, stale: 0 })
      const second = yield* hub.request("POST", "/upstream/events", {
        json: envelope([tenant.wabaId, [change]], [stranger.wabaId, [inboundChange(stranger, META_MESSAGES.text)]])
      })
      expect(second.body).toEqual({ changes: 2, accepted: 0, duplicates: 1, unrouted: 1, deliveries: 0, stale: 0 })

      yield* untilDelivery(tenant, fineHook, "succeeded")
      yield* untilDelivery(tenant, failingHook, "failed")
      yield* untilWebhook(tenant, goneHook, (body) => body.active === false && body.disabled_reason === "gone_410")
      const after = yield* scrape()

      expect(moved(before, after, "hub_sends_total", { result: "sent" })).toBe(1)
      expect(moved(before, after, "hub_sends_total", { result: "refused" })).toBe(1)
      expect(moved(before, after, "hub_sends_total")).toBe(2)
      expect(moved(before, after, "hub_graph_call_duration_seconds_count", { call: "sendMessage", outcome: "ok" }))
        .toBe(1)
      expect(moved(before, after, "hub_graph_call_duration_seconds_count", { call: "sendMessage", outcome: "refused" }))
        .toBe(1)
      // The number's throughput level, read from the Graph before its first send (PhoneNumbers/Throughput.ts).
      expect(moved(before, after, "hub_graph_call_duration_seconds_count", { call: "getPhoneNumber", outcome: "ok" }))
        .toBe(1)
      expect(moved(before, after, "hub_graph_call_duration_seconds_count")).toBe(3)

      expect(moved(before, after, "hub_upstream_posts_total")).toBe(2)
      expect(moved(before, after, "hub_upstream_changes_total")).toBe(3)
      expect(moved(before, after, "hub_upstream_duplicate_changes_total")).toBe(1)
      expect(moved(before, after, "hub_upstream_unrouted_changes_total")).toBe(1)
      expect(moved(before, after, "hub_deliveries_queued_total")).toBe(3)

      expect(moved(before, after, "hub_delivery_attempt_duration_seconds_count", { outcome: "succeeded" })).toBe(1)
      expect(moved(before, after, "hub_delivery_attempt_duration_seconds_count", { outcome: "failed" })).toBe(1)
      expect(moved(before, after, "hub_delivery_attempt_duration_seconds_count", { outcome: "dead" })).toBe(1)
      expect(moved(before, after, "hub_webhooks_disabled_total", { reason: "gone_410" })).toBe(1)
      expect(moved(before, after, "hub_webhooks_disabled_total")).toBe(1)

      // The outbox now: the failed delivery waits an hour, the 410's is dead, nothing is due or in flight.
      expect(after.value("hub_outbox_deliveries", { state: "failed" })).toBe(1)
      expect(after.value("hub_outbox_deliveries", { state: "dead" })).toBe(1)
      expect(after.value("hub_outbox_deliveries", { state: "due" })).toBe(0)
      expect(after.value("hub_outbox_deliveries", { state: "leased" })).toBe(0)
      expect(after.value("hub_dispatch_waiting")).toBe(0)
      expect(after.value("hub_outbox_oldest_due_age_seconds")).toBe(0)

      // Requests by route pattern and status, the fast lane's and HttpApi's alike.
      const requests = (route: string, status: string, method = "POST") =>
        moved(before, after, "hub_http_request_duration_seconds_count", { method, route, status })
      expect(requests("/api/messages", "200")).toBe(1)
      expect(requests("/api/messages", "400")).toBe(1)
      expect(requests("/upstream/events", "200")).toBe(2)
      expect(requests("/api/webhooks/:id/deliveries", "200", "GET")).toBeGreaterThanOrEqual(2)
      expect(requests("/api/webhooks/:id", "200", "GET")).toBeGreaterThanOrEqual(1)
      expect(requests("/metrics", "200", "GET")).toBe(1)

      // Every shared transaction is timed; the process's memory is there.
      expect(moved(before, after, "hub_sql_commit_duration_seconds_count")).toBeGreaterThan(0)
      expect(after.value("process_resident_memory_bytes")).toBeGreaterThan(0)
      expect(after.value("nodejs_heap_size_used_bytes")).toBeGreaterThan(0)
      // Under Bun the heap's size is JavaScriptCore's: at least what is in use, and far below the
      // address space prom-client's process_heap_bytes reported (left out).
      expect(after.value("nodejs_heap_size_total_bytes")).toBeGreaterThanOrEqual(
        after.value("nodejs_heap_size_used_bytes")
      )
      expect(after.value("nodejs_heap_size_total_bytes")).toBeLessThan(after.value("process_resident_memory_bytes") * 4)
      expect(after.text).not.toContain("process_heap_bytes")
    }))

  it.scoped("route labels are patterns: no id from a path is ever a label", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const webhookId = yield* createWebhookId(tenant, (yield* makeReceiver()).url)
      expect((yield* hub.request("GET", `/api/webhooks/${webhookId}?x=1`, { token: tenant.instanceToken })).status)
        .toBe(200)
      expect((yield* hub.request("GET", "/api/webhooks/whk_unknown123", { token: tenant.instanceToken })).status).toBe(
        404
      )
      expect((yield* hub.request("GET", "/no/such/path/abc123")).status).toBe(404)
      // The dashboard's client-side routes are pages, not documented operations: fetched as they are.
      expect((yield* Effect.promise(() => fetch(`${hub.baseUrl}/dashboard/webhooks/abc123`))).status).toBe(200)
      const metrics = yield* scrape()
      const routes = new Set(
        metrics.samples.filter((s) => s.name === "hub_http_request_duration_seconds_count").map((s) => s.labels.route)
      )
      expect([...routes]).toEqual(
        expect.arrayContaining(["/api/webhooks/:id", "/api/webhooks", "unmatched", "/dashboard/*"])
      )
      expect(
        metrics.value("hub_http_request_duration_seconds_count", {
          method: "GET",
          route: "/api/webhooks/:id",
          status: "404"
        })
      ).toBe(1)
      expect(
        metrics.value("hub_http_request_duration_seconds_count", { method: "GET", route: "unmatched", status: "404" })
      ).toBe(1)
      for (const id of [webhookId, "whk_unknown123", "abc123", tenant.instanceId]) {
        expect(metrics.text).not.toContain(id)
      }
      for (const route of routes) expect(route === "unmatched" || route?.startsWith("/")).toBe(true)
    }))
})

const TOKEN = "metrics-scrape-token-7f3a"

layer(testHub({ metricsToken: Option.some(Redacted.make(TOKEN)) }), { excludeTestServices: true })(
  "metrics behind HUB_METRICS_TOKEN",
  (it) => {
    it.effect("401 without the token or with another; 200 with it", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        for (const token of [undefined, "wrong", `${TOKEN}x`, tenant.orgToken]) {
          const refused = yield* hub.request("GET", "/metrics", token === undefined ? {} : { token })
          expect(refused.status).toBe(401)
          expect(refused.body).toEqual({ statusCode: 401, message: "Unauthorized" })
        }
        const lowerCase = yield* hub.request("GET", "/metrics", { headers: { authorization: `bearer ${TOKEN}` } })
        expect(lowerCase.status).toBe(200)
        const metrics = yield* scrape(TOKEN)
        expect(metrics.value("hub_http_request_duration_seconds_count", { route: "/metrics", status: "401" })).toBe(4)
      }))
  }
)

layer(testHub({ metrics: false }), { excludeTestServices: true })("HUB_METRICS=false", (it) => {
  it.effect("keeps nothing: /metrics answers 404, and the hub works as ever", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      expect((yield* sendMessage(tenant.instanceToken, TEXT)).status).toBe(200)
      const off = yield* hub.request("GET", "/metrics")
      expect(off.status).toBe(404)
      expect(off.body).toEqual({
        statusCode: 404,
        message: "This hub keeps no metrics (HUB_METRICS=false)",
        error: "metrics_disabled"
      })
    }))
})

layer(testHub(), { excludeTestServices: true })("the outbox's scrape-time read", (it) => {
  it.effect("counts each state, capped, through indexes only", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const hooks = [
        yield* createWebhookId(tenant, "https://example.com/a"),
        yield* createWebhookId(tenant, "https://example.com/b")
      ]
      // Turned off so the dispatcher leaves the rows below alone.
      yield* sql`UPDATE webhooks SET active = 0 WHERE ${sql.in("id", hooks)}`.pipe(Effect.orDie)
      yield* sql`INSERT INTO events (id, instance_id, body, change_count, received_at)
        VALUES ('evt_metrics', ${tenant.instanceId}, '{}', 1, '2026-01-01T00:00:00.000Z')`.pipe(Effect.orDie)
      const now = Date.now()
      const at = (offsetMs: number) => new Date(now + offsetMs).toISOString()
      const row = (
        id: string,
        webhookId: string,
        status: string,
        next: string | null,
        leaseUntil: string | null = null
      ) =>
        sql`INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, created_at, updated_at)
          VALUES (${id}, ${webhookId}, 'evt_metrics', ${`msg_${id}`}, ${status}, 0, ${next}, ${
          leaseUntil === null ? null : "other"
        }, ${leaseUntil}, ${at(-60_000)}, ${at(-60_000)})`
          .pipe(Effect.orDie)
      yield* row("d1", hooks[0] ?? "", "pending", at(-30_000))
      yield* row("d2", hooks[1] ?? "", "failed", at(-10_000))
      yield* row("d3", hooks[0] ?? "", "pending", at(-40_000), at(60_000)) // leased by another process: not due
      yield* row("d4", hooks[0] ?? "", "pending", at(-50_000), at(-1_000)) // its lease expired: due again
      yield* row("d5", hooks[1] ?? "", "failed", at(3_600_000))
      yield* row("d6", hooks[0] ?? "", "dead", null)
      yield* row("d7", hooks[1] ?? "", "dead", null)
      yield* row("d8", hooks[1] ?? "", "cancelled", null)
      yield* row("d9", hooks[0] ?? "", "succeeded", null)

      const queries = outboxStateQueries(sql)
      const counts = yield* queries.read(at(0))
      expect(counts).toEqual({ due: 3, failed: 1, dead: 2, oldestDueAt: at(-50_000) })

      const [text, params] = queries.statement(at(0)).compile()
      const plan =
        (yield* sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params).pipe(Effect.orDie)).map((
          r
        ) => r.detail)
      const onDeliveries = plan.filter((step) =>
        /\b(deliveries|d)\b/.test(step) && !step.startsWith("SCALAR") && !step.startsWith("CO-ROUTINE")
      )
      // Every read of deliveries is a search of an index: the free due ranges, the expired leases, and per
      // webhook the failures' index (the webhooks themselves are scanned: a handful per instance).
      expect(onDeliveries.length).toBeGreaterThan(0)
      for (const step of onDeliveries) {
        expect(step).toMatch(
          /^SEARCH (deliveries|d) USING (COVERING )?INDEX (deliveries_due|deliveries_leased|deliveries_webhook_failures) /
        )
      }
      expect(plan.some((step) => step.includes("deliveries_leased (lease_expires_at<?)"))).toBe(true)
      expect(plan.some((step) => step.includes("deliveries_webhook_failures (webhook_id=? AND status=?)"))).toBe(true)

      // A backlog past the cap is counted up to it ("at least this many").
      yield* sql`INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, created_at, updated_at)
        WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${OUTBOX_COUNT_CAP + 5})
        SELECT 'backlog' || i, ${hooks[1] ?? ""}, 'evt_metrics', 'msg_backlog' || i, 'failed', 1, ${at(-5_000)}, ${
        at(-60_000)
      }, ${at(-60_000)} FROM n`
        .pipe(Effect.orDie)
      expect(yield* queries.read(at(0))).toEqual({
        due: OUTBOX_COUNT_CAP,
        failed: 1,
        dead: 2,
        oldestDueAt: at(-50_000)
      })
    }))
})

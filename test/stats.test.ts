/**
 * The overview's time series (GET /api/stats/timeseries) through the real HTTP server on both engines,
 * against a recording fake Graph: sends made at once, refused and queued counted by the minute they were
 * accepted and their status now, webhook delivery attempts by outcome, the sampled queue depth, every
 * minute of the window present (zeros where nothing happened), each token seeing only its own scope.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { QueueDepthSampler } from "../src/Stats/QueueDepthSampler.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { sendTyped } from "./support/Messages.js"
import { makeReceiver } from "./support/Receivers.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { addInstance, createWebhookId, seedTenant, type Tenant, TestHub } from "./support/TestHub.js"
import { individualMessage } from "./support/TypedRequests.js"
import { postUpstream } from "./support/TypedWebhooks.js"
import { envelope, status, statusChange } from "./support/UpstreamPayloads.js"

const TO = "16505551234"
const text = (body: string) => ({ ...individualMessage, to: TO, type: "text" as const, text: { body } })

/** The time series through the typed client (so the answer is checked against the document too). */
const seriesOf = (token: string, urlParams: { hours?: number; instance_id?: string } = {}) =>
  Effect.flatMap(
    Effect.flatMap(TestHub, (hub) => hub.client(token)),
    (client) => client.stats.timeseries({ urlParams: { hours: 1, ...urlParams } })
  )

type Series = Effect.Effect.Success<ReturnType<typeof seriesOf>>

/** Each count summed over the window's minutes. */
const totals = (series: Series) => {
  const sum = (count: (minute: Series["minutes"][number]) => number) =>
    series.minutes.reduce((total, minute) => total + count(minute), 0)
  return {
    sends: {
      pending: sum((m) => m.sends.pending),
      sent: sum((m) => m.sends.sent),
      delivered: sum((m) => m.sends.delivered),
      read: sum((m) => m.sends.read),
      failed: sum((m) => m.sends.failed)
    },
    deliveries: {
      succeeded: sum((m) => m.deliveries.succeeded),
      failed: sum((m) => m.deliveries.failed),
      dead: sum((m) => m.deliveries.dead)
    }
  }
}

/** A send the fake Graph refuses (the record ends failed with Meta's error). */
const refuseNextSend = (tenant: Tenant) =>
  Effect.flatMap(FakeGraph, (fake) =>
    fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
      status: 400,
      body: { error: { message: "(#131026) Message undeliverable", type: "OAuthException", code: 131026 } }
    }))

/** A queued send whose time is an hour away: it waits in the queue. */
const queueForLater = (token: string) =>
  Effect.flatMap(TestHub, (hub) =>
    hub.request("POST", "/api/messages", {
      token,
      json: { ...text("later"), send_at: new Date(Date.now() + 3600_000).toISOString() }
    }))

describe.each(["sqlite", "postgres"] as const)("stats time series (%s)", (engine) => {
  // One retry, soon: a receiver that always fails has one failed attempt and then a dead one.
  layer(testHubOnFakeGraph({ engine, webhookRetry: [Duration.millis(10)], webhookAllowPrivate: true }), {
    excludeTestServices: true
  })("", (it) => {
    it.scoped("counts sends by status, attempts by outcome and the sampled queue depth, every minute present", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        const taking = yield* makeReceiver(() => ({ status: 200 }))
        const failing = yield* makeReceiver(() => ({ status: 500 }))
        yield* createWebhookId(tenant, taking.url)
        yield* createWebhookId(tenant, failing.url)

        const first = yield* sendTyped(tenant.instanceToken, text("one"))
        yield* sendTyped(tenant.instanceToken, text("two"))
        yield* refuseNextSend(tenant)
        const refused = yield* (yield* TestHub).request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("refused")
        })
        expect(refused.status).toBe(400)
        const queued = yield* queueForLater(tenant.instanceToken)
        expect(queued.status).toBe(202)
        // Another tenant's send is never counted here.
        yield* sendTyped(other.instanceToken, text("elsewhere"))

        // Meta says the first was delivered: its record moves on, and the event goes to both webhooks.
        const wamid = first.messages[0]?.id ?? ""
        yield* postUpstream(envelope([tenant.wabaId, [
          statusChange(tenant, status(wamid, "delivered", Math.floor(Date.now() / 1000)))
        ]]))
        const sampled = yield* Effect.flatMap(QueueDepthSampler, (sampler) => sampler.sampleNow)
        expect(sampled.depths).toContainEqual({ phoneNumberId: tenant.phoneNumberId, depth: 1 })

        const series = yield* untilAttemptsLogged(
          "the three attempts counted",
          seriesOf(tenant.orgToken),
          (s) => totals(s).deliveries.dead === 1 && totals(s).deliveries.succeeded === 1
        )
        expect(totals(series)).toEqual({
          sends: { pending: 2, sent: 0, delivered: 1, read: 0, failed: 1 },
          deliveries: { succeeded: 1, failed: 1, dead: 1 }
        })
        // Every minute of the hour, one apart, oldest first; the last is the current minute.
        expect(series.hours).toBe(1)
        expect(series.instance_id).toBeNull()
        expect(series.minutes).toHaveLength(60)
        const starts = series.minutes.map((m) => Date.parse(m.minute))
        expect(starts.every((at, i) => i === 0 || at - (starts[i - 1] ?? 0) === 60_000)).toBe(true)
        expect(series.from).toBe(series.minutes[0]?.minute)
        expect(Date.parse(series.to)).toBe((starts[59] ?? 0) + 60_000)
        expect(Date.parse(series.to)).toBeGreaterThan(Date.now() - 1000)
        // The queued send, as sampled, in the minute sampled; quiet minutes are zeros.
        const sampledMinute = series.minutes.find((m) => m.minute.slice(0, 16) === sampled.minute)
        expect(sampledMinute?.queue_depth).toBe(1)
        const quiet = series.minutes[0]
        expect(quiet).toEqual({
          minute: series.from,
          sends: { pending: 0, sent: 0, delivered: 0, read: 0, failed: 0 },
          deliveries: { succeeded: 0, failed: 0, dead: 0 },
          queue_depth: 0
        })

        // The instance token sees the same (its instance is the organization's only one); the other tenant only its own.
        expect(totals(yield* seriesOf(tenant.instanceToken))).toEqual(totals(series))
        const theirs = yield* seriesOf(other.orgToken)
        expect(totals(theirs)).toEqual({
          sends: { pending: 1, sent: 0, delivered: 0, read: 0, failed: 0 },
          deliveries: { succeeded: 0, failed: 0, dead: 0 }
        })
        expect(theirs.minutes.every((m) => m.queue_depth === 0)).toBe(true)
      }))

    it.effect("an organization token counts every instance or the one it names; an instance token its own", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const second = yield* addInstance(tenant)
        yield* sendTyped(tenant.instanceToken, text("first number"))
        yield* sendTyped(second.instanceToken, text("second number"))
        yield* sendTyped(second.instanceToken, text("second number again"))
        const pending = (s: Series) => totals(s).sends.pending
        expect(pending(yield* seriesOf(tenant.orgToken))).toBe(3)
        const named = yield* seriesOf(tenant.orgToken, { instance_id: second.instanceId })
        expect(named.instance_id).toBe(second.instanceId)
        expect(pending(named)).toBe(2)
        expect(pending(yield* seriesOf(second.instanceToken))).toBe(2)
        expect(pending(yield* seriesOf(tenant.instanceToken))).toBe(1)
        const hub = yield* TestHub
        // The current minute's depth is the queue's now, before any sample of it is taken.
        expect((yield* queueForLater(second.instanceToken)).status).toBe(202)
        const queuedNow = (s: Series) => s.minutes[s.minutes.length - 1]?.queue_depth
        expect(queuedNow(yield* seriesOf(tenant.orgToken))).toBe(1)
        expect(queuedNow(yield* seriesOf(second.instanceToken))).toBe(1)
        expect(queuedNow(yield* seriesOf(tenant.instanceToken))).toBe(0)
        const byNumber = yield* hub.request(
          "GET",
          `/api/stats/timeseries?phone_number_id=${tenant.phoneNumberId}`,
          { token: tenant.orgToken }
        )
        expect(byNumber.status).toBe(200)
        expect(byNumber.body.instance_id).toBe(tenant.instanceId)
      }))

    it.effect("the sampler writes one row per minute and number, however many replicas sample", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        expect((yield* queueForLater(tenant.instanceToken)).status).toBe(202)
        expect((yield* queueForLater(tenant.instanceToken)).status).toBe(202)
        const sampler = yield* QueueDepthSampler
        // Two replicas sampling the same minute (the same service twice: each reads the shared queue and upserts).
        const one = yield* sampler.sampleNow
        const two = yield* sampler.sampleNow
        const rows = yield* Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ readonly minute: string; readonly depth: number }>`SELECT minute, depth FROM queue_depth_samples
            WHERE phone_number_id = ${tenant.phoneNumberId} ORDER BY minute`
        ).pipe(Effect.orDie)
        // One row for the minute (two at a minute's turn, or with the hub's own sampler's beat), the depth never summed.
        expect(rows.map((r) => r.minute)).toEqual(expect.arrayContaining([one.minute, two.minute]))
        expect(new Set(rows.map((r) => r.minute)).size).toBe(rows.length)
        expect(rows.map((r) => Number(r.depth))).toEqual(rows.map(() => 2))
        const series = yield* seriesOf(tenant.instanceToken)
        expect(series.minutes.find((m) => m.minute.slice(0, 16) === two.minute)?.queue_depth).toBe(2)

        // Past minutes read their samples: the tenant's numbers' summed, another tenant's left out.
        const second = yield* addInstance(tenant)
        const other = yield* seedTenant()
        const past = new Date(Date.now() - 5 * 60_000).toISOString().slice(0, 16)
        yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`INSERT INTO queue_depth_samples ${
            sql.insert([
              { minute: past, phone_number_id: tenant.phoneNumberId, depth: 7 },
              { minute: past, phone_number_id: second.phoneNumberId, depth: 3 },
              { minute: past, phone_number_id: other.phoneNumberId, depth: 100 }
            ])
          }`).pipe(Effect.orDie)
        const depthAt = (s: Series) => s.minutes.find((m) => m.minute.slice(0, 16) === past)?.queue_depth
        expect(depthAt(yield* seriesOf(tenant.orgToken))).toBe(10)
        expect(depthAt(yield* seriesOf(tenant.instanceToken))).toBe(7)
        expect(depthAt(yield* seriesOf(other.orgToken))).toBe(100)
      }))

    it.effect("refuses a bad window, another tenant's instance and a session token, naming why", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        for (const hours of ["0", "25", "1.5", "soon", ""]) {
          const refused = yield* hub.request("GET", `/api/stats/timeseries?hours=${hours}`, { token: tenant.orgToken })
          expect(refused.status).toBe(400)
          expect(refused.body).toMatchObject({ statusCode: 400, error: "validation_failed" })
          expect(refused.body.message).toContain("hours")
          expect(refused.body.message).toContain("must be a whole number from 1 to 24")
        }
        const elsewhere = yield* hub.request("GET", `/api/stats/timeseries?instance_id=${other.instanceId}`, {
          token: tenant.orgToken
        })
        expect(elsewhere.status).toBe(404)
        expect(elsewhere.body).toMatchObject({ statusCode: 404, error: "not_found" })
        const notOwn = yield* hub.request("GET", `/api/stats/timeseries?instance_id=${other.instanceId}`, {
          token: tenant.instanceToken
        })
        expect(notOwn.status).toBe(403)
        expect(notOwn.body).toMatchObject({ statusCode: 403, error: "forbidden_instance" })
        const session = yield* hub.request("GET", "/api/stats/timeseries", { token: tenant.sessionToken })
        expect(session.status).toBe(403)
        expect((yield* hub.request("GET", "/api/stats/timeseries")).status).toBe(401)
        // The longest window answers every minute of it.
        const day = yield* hub.request("GET", "/api/stats/timeseries?hours=24", { token: tenant.orgToken })
        expect(day.status).toBe(200)
        expect(Array.isArray(day.body.minutes) ? day.body.minutes.length : 0).toBe(1440)
      }))
  })
})

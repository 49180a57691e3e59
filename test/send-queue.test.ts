/**
 * Queued sends (issue 32) through the real HTTP server on both engines, against a recording fake Graph:
 * `Prefer: respond-async` or the queue's options answer 202 once the send is on the disk, the drainer
 * sends it (the hub's options never reach Meta), retries what Meta answers "later" until the validity
 * ends, never sends twice what may have reached Meta, and a queued send can be cancelled.
 * Sends go raw (wire tests): what is under test is carried by headers the typed client neither sends nor
 * shows (`Prefer`, `Preference-Applied`, `Idempotent-Replayed`, `Retry-After`) and by option values it
 * refuses to send; records are read through the typed client.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Schema, Stream, TestClock } from "effect"
import { SendQueueDrainer } from "../src/SendQueue/Drainer.js"
import { FakeGraph, type FakeResponse, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { sendTyped } from "./support/Messages.js"
import { makeReceiver } from "./support/Receivers.js"
import { untilSignalledThat } from "./support/Signals.js"
import { seedTenant, type Tenant, TestHub } from "./support/TestHub.js"
import { individualMessage, messagesFirstPage } from "./support/TypedRequests.js"
import { createTyped, deliveriesTyped, postUpstream } from "./support/TypedWebhooks.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const TO = "16505551234"
const respondAsync = { prefer: "respond-async" }
const text = (body: string, to = TO) => ({ to, type: "text", text: { body } })

/** Settled queued sends: the drainer's count, as a signal for the checks below. */
const settled = Stream.unwrap(Effect.map(SendQueueDrainer, (drainer) => drainer.settled))

/** The records of the tenant, read through the typed client until `condition` holds of them. */
const recordsOnceSettled = (
  token: string,
  what: string,
  condition: (records: ReadonlyArray<Readonly<Record<string, unknown>>>) => boolean
) =>
  Effect.gen(function*() {
    const client = yield* (yield* TestHub).client(token)
    return yield* untilSignalledThat(
      settled,
      what,
      Effect.map(client.messages.list({ urlParams: messagesFirstPage }), (page) => page.data),
      condition
    )
  })

/** A queued send whose Graph call the fake answers with `answer`: the records once it failed. */
const failedSend = (tenant: Tenant, body: string, answer: FakeResponse) =>
  Effect.gen(function*() {
    const fake = yield* FakeGraph
    yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, answer)
    yield* (yield* TestHub).request("POST", "/api/messages", {
      token: tenant.instanceToken,
      json: text(body),
      headers: respondAsync
    })
    return yield* recordsOnceSettled(tenant.instanceToken, "the send failed", (r) => r[0]?.status === "failed")
  })

/** A queued send whose Graph call the fake leaves unanswered: the records once it failed. */
const unansweredSend = (tenant: Tenant, body: string) => failedSend(tenant, body, { hang: true })

/** A text send's body as the fake Graph received it. */
const decodeText = Schema.decodeUnknownSync(
  Schema.Struct({ to: Schema.String, text: Schema.Struct({ body: Schema.String }) })
)

/** The fake Graph refuses the number's next send(s) with Meta's `code`. */
const refuseSends = (phoneNumberId: string, code: number, message: string, times = 1) =>
  Effect.flatMap(FakeGraph, (fake) =>
    fake.respond({ method: "POST", path: `/${phoneNumberId}/messages` }, {
      status: 400,
      body: { error: { message, type: "OAuthException", code, fbtrace_id: `F${code}` } }
    }, times))

const messageSends = (phoneNumberId: string) =>
  Effect.map(
    Effect.flatMap(FakeGraph, (fake) => fake.requests),
    (requests) => requests.filter((r) => r.method === "POST" && r.path.endsWith(`/${phoneNumberId}/messages`))
  )

describe.each(["sqlite", "postgres"] as const)("queued sends (%s)", (engine) => {
  // A Graph call unanswered for 1 s is one whose outcome is unknown.
  layer(testHubOnFakeGraph({ engine, graphTimeout: Duration.seconds(1), webhookAllowPrivate: true }), {
    excludeTestServices: true
  })("", (it) => {
    it.effect("Prefer: respond-async answers 202 with the pending record; the drainer sends exactly the message and the record is accepted", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("queued hello"),
          headers: respondAsync
        })
        expect(queued.status).toBe(202)
        expect(queued.headers.get("preference-applied")).toBe("respond-async")
        expect(queued.body).toEqual({
          id: expect.stringMatching(/^msg_/),
          status: "pending",
          send_at: expect.any(String),
          expires_at: expect.any(String)
        })
        // Four hours of validity by default (HUB_QUEUE_VALIDITY).
        expect(Date.parse(String(queued.body.expires_at)) - Date.parse(String(queued.body.send_at))).toBe(4 * 3600_000)
        const [record] = yield* recordsOnceSettled(
          tenant.instanceToken,
          "the queued send accepted",
          (records) => typeof records[0]?.waMessageId === "string"
        )
        expect(record).toMatchObject({
          id: queued.body.id,
          waMessageId: expect.stringMatching(/^wamid\./),
          status: "pending",
          priority: "transactional",
          sendAt: queued.body.send_at,
          expiresAt: queued.body.expires_at
        })
        expect(record?.failureReason).toBeUndefined()
        // The send counts in its number's measured pace: one over the last ten seconds.
        const byOrg = yield* hub.client(tenant.orgToken)
        const [queue] = (yield* untilSignalledThat(
          settled,
          "the send counted in the number's pace",
          byOrg.sendQueue.list(),
          (queues) => queues.data[0]?.sends_per_second === 0.1
        )).data
        expect(queue).toMatchObject({ phone_number_id: tenant.phoneNumberId, depth: 0, sends_per_second: 0.1 })
        const sends = yield* messageSends(tenant.phoneNumberId)
        expect(sends.map((s) => s.json)).toEqual([{
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: TO,
          type: "text",
          text: { body: "queued hello" }
        }])
        // The number's live level was read from the Graph when the queue first used it.
        const fake = yield* FakeGraph
        const levelReads = (yield* fake.requests).filter((r) =>
          r.method === "GET" && r.path.endsWith(`/${tenant.phoneNumberId}`) && r.query.fields === "throughput"
        )
        expect(levelReads).toHaveLength(1)
      }))

    it.effect("the queue's options are the hub's own: send_at, validity and priority queue the send and never reach Meta", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text("bulk one"), validity: 60, priority: "bulk" }
        })
        expect(queued.status).toBe(202)
        expect(Date.parse(String(queued.body.expires_at)) - Date.parse(String(queued.body.send_at))).toBe(60_000)
        yield* recordsOnceSettled(
          tenant.instanceToken,
          "the bulk send accepted",
          (records) => typeof records[0]?.waMessageId === "string"
        )
        const [send] = yield* messageSends(tenant.phoneNumberId)
        expect(send?.json).toEqual({
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: TO,
          type: "text",
          text: { body: "bulk one" }
        })
      }))

    it.effect("bad queue options are 400s naming the field, and nothing is queued", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const cases = [
          { json: { ...text("x"), send_at: "2020-01-01T00:00:00Z" }, field: "send_at", message: /in the past/ },
          {
            json: { ...text("x"), send_at: new Date(Date.now() + 40 * 86_400_000).toISOString() },
            field: "send_at",
            message: /35 days/
          },
          { json: { ...text("x"), send_at: "next tuesday" }, field: "send_at", message: /ISO 8601/ },
          { json: { ...text("x"), validity: 0 }, field: "validity", message: /1 to 36000/ },
          { json: { ...text("x"), validity: 36_001 }, field: "validity", message: /1 to 36000/ },
          { json: { ...text("x"), priority: "urgent" }, field: "priority", message: /transactional or bulk/ }
        ]
        for (const c of cases) {
          const refused = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json: c.json })
          expect(refused.status).toBe(400)
          expect(refused.body).toMatchObject({ statusCode: 400, details: [{ field: c.field }] })
          expect(JSON.stringify(refused.body)).toMatch(c.message)
        }
        const client = yield* hub.client(tenant.instanceToken)
        expect((yield* client.messages.list({ urlParams: messagesFirstPage })).total).toBe(0)
      }))

    it.effect("a scheduled send can be cancelled: 200 with the record failed as cancelled; again is 409; another tenant gets 404; it is never sent", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        const sendAt = new Date(Date.now() + 3_600_000).toISOString()
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text("later"), send_at: sendAt }
        })
        expect(queued.status).toBe(202)
        expect(queued.body.send_at).toBe(sendAt)
        // The metrics show the number's queue: one send, none of it waiting yet (its time has not come).
        const metrics = yield* hub.request("GET", "/metrics")
        expect(metrics.text).toContain(`hub_queue_depth{phone_number_id="${tenant.phoneNumberId}"} 1\n`)
        expect(metrics.text).toContain(`hub_queue_oldest_wait_seconds{phone_number_id="${tenant.phoneNumberId}"} 0\n`)
        const queues = yield* hub.request("GET", "/api/send-queues", { token: tenant.orgToken })
        expect(queues.body).toEqual({
          data: [{
            instance_id: tenant.instanceId,
            phone_number_id: tenant.phoneNumberId,
            depth: 1,
            oldest_wait_seconds: 0,
            send_rate: 80,
            sends_per_second: 0
          }]
        })
        const id = String(queued.body.id)
        const foreign = yield* hub.request("DELETE", `/api/messages/${id}`, { token: other.instanceToken })
        expect(foreign.status).toBe(404)
        const cancelled = yield* hub.request("DELETE", `/api/messages/${id}`, { token: tenant.orgToken })
        expect(cancelled.status).toBe(200)
        expect(cancelled.body).toMatchObject({
          id,
          status: "failed",
          failureReason: "cancelled",
          sendAt,
          waMessageId: null
        })
        const again = yield* hub.request("DELETE", `/api/messages/${id}`, { token: tenant.instanceToken })
        expect(again.status).toBe(409)
        expect(again.body).toMatchObject({ statusCode: 409, error: "not_queued" })
        expect(yield* messageSends(tenant.phoneNumberId)).toEqual([])
      }))

    it.effect("throttling (130429) is retried after the backoff: sent on the second try", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        yield* refuseSends(tenant.phoneNumberId, 130429, "Rate limit hit")
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("retry me"),
          headers: respondAsync
        })
        expect(queued.status).toBe(202)
        const [record] = yield* recordsOnceSettled(tenant.instanceToken, "the retried send accepted", (records) =>
          typeof records[0]?.waMessageId === "string")
        expect(record).toMatchObject({ status: "pending", waMessageId: expect.stringMatching(/^wamid\./) })
        expect(yield* messageSends(tenant.phoneNumberId)).toHaveLength(2)
        const metrics = (yield* hub.request("GET", "/metrics")).text
        expect(metrics).toContain(
          `hub_queue_sends_total{phone_number_id="${tenant.phoneNumberId}",outcome="retried"} 1\n`
        )
        expect(metrics).toContain(`hub_queue_sends_total{phone_number_id="${tenant.phoneNumberId}",outcome="sent"} 1\n`)
        expect(metrics).not.toContain(`hub_queue_depth{phone_number_id="${tenant.phoneNumberId}"}`)
      }))

    it.effect("a refusal is not retried: the record ends failed as refused with Meta's code", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        yield* refuseSends(tenant.phoneNumberId, 131030, "Recipient not allowed")
        yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("refused"),
          headers: respondAsync
        })
        const [record] = yield* recordsOnceSettled(
          tenant.instanceToken,
          "the refused send failed",
          (records) => records[0]?.status === "failed"
        )
        expect(record).toMatchObject({ status: "failed", failureReason: "refused", waMessageId: null })
        expect(yield* messageSends(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a Graph call left unanswered is never made again: failed as outcome_unknown", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const [record] = yield* unansweredSend(tenant, "maybe")
        expect(record).toMatchObject({ status: "failed", failureReason: "outcome_unknown" })
        expect(yield* messageSends(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a 2xx answer the hub cannot read is not tried again (the message may have gone): failed as outcome_unknown", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const [record] = yield* failedSend(tenant, "an odd answer", {
          body: { messaging_product: "whatsapp", accepted: true }
        })
        expect(record).toMatchObject({ status: "failed", failureReason: "outcome_unknown" })
        expect(yield* messageSends(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a send whose outcome was unknown takes the id of Meta's status naming its person, and moves on", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        yield* unansweredSend(tenant, "maybe it went")
        const now = Math.floor(Date.now() / 1000)
        const client = yield* hub.client(tenant.instanceToken)
        const record = () => Effect.map(client.messages.list({ urlParams: messagesFirstPage }), (page) => page.data[0])
        // A status of someone else's message, sent outside the hub, is not taken for it.
        const elsewhere = wamid()
        yield* postUpstream(envelope([tenant.wabaId, [
          statusChange(tenant, status(elsewhere, "sent", now, { recipient_id: "16505550000" }))
        ]]))
        expect(yield* record()).toMatchObject({ status: "failed", failureReason: "outcome_unknown" })
        const reached = wamid()
        yield* postUpstream(envelope([tenant.wabaId, [
          statusChange(tenant, status(reached, "sent", now), status(reached, "delivered", now + 1))
        ]]))
        const corrected = yield* record()
        expect(corrected).toMatchObject({ status: "delivered", waMessageId: reached })
        expect(corrected?.failureReason).toBeUndefined()
        // Still made once: the correction is the status's, not a second call.
        expect(yield* messageSends(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.scoped("a lost send whose record already holds Meta's id (an earlier hub recorded it apart) is told sent, not made again", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        yield* createTyped(tenant.instanceToken, { name: "outcomes", url: receiver.url, events: ["hub.message_queue"] })
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text("accepted before the crash"), send_at: new Date(Date.now() + 3_600_000).toISOString() }
        })
        const id = String(queued.body.id)
        // What a replica of an earlier version left when killed between its two commits: the acceptance
        // recorded, the send still `sending` under a lease that has run out.
        const accepted = wamid()
        yield* sql`UPDATE messages SET wa_message_id = ${accepted} WHERE id = ${id}`
        yield* sql`UPDATE send_queue SET state = 'sending', lease_owner = 'an earlier hub', lease_until = 0
          WHERE message_id = ${id}`
        const [told] = yield* receiver.waitFor("the lost send's outcome", (r) => r.length === 1)
        expect(JSON.parse(told?.body ?? "").entry[0].changes[0].value).toMatchObject({
          message_id: id,
          status: "sent",
          wa_message_id: accepted
        })
        const [record] = yield* recordsOnceSettled(tenant.instanceToken, "the send told", () => true)
        expect(record).toMatchObject({ id, status: "pending", waMessageId: accepted })
        expect(record?.failureReason).toBeUndefined()
        expect(yield* sql`SELECT message_id FROM send_queue`).toEqual([])
        expect(yield* messageSends(tenant.phoneNumberId)).toEqual([])
      }))

    it.effect("a send still refused as throttled when its validity ends fails as expired", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        yield* refuseSends(tenant.phoneNumberId, 131057, "Maintenance", 10)
        yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text("soon"), validity: 1 }
        })
        const [record] = yield* recordsOnceSettled(
          tenant.instanceToken,
          "the send expired",
          (records) => records[0]?.status === "failed"
        )
        expect(record).toMatchObject({ status: "failed", failureReason: "expired" })
      }))

    it.scoped("webhooks naming hub.message_queue are told each outcome, signed; webhooks taking every kind are not", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const named = yield* makeReceiver()
        const everything = yield* makeReceiver()
        const namedHook = yield* createTyped(tenant.instanceToken, {
          name: "queue outcomes",
          url: named.url,
          events: ["hub.message_queue"]
        })
        const allHook = yield* createTyped(tenant.instanceToken, { name: "everything", url: everything.url })
        const sent = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("told"),
          headers: respondAsync
        })
        const [told] = yield* named.waitFor("the sent outcome", (r) => r.length === 1)
        const [record] = yield* (yield* hub.client(tenant.instanceToken)).messages.list({
          urlParams: messagesFirstPage
        })
          .pipe(Effect.map((page) => page.data))
        expect(told?.headers["webhook-signature"]).toMatch(/^v1,/)
        expect(JSON.parse(told?.body ?? "")).toEqual({
          object: "hub.message_queue",
          entry: [{
            id: tenant.instanceId,
            time: expect.any(Number),
            changes: [{
              field: "hub.message_queue",
              value: {
                message_id: sent.body.id,
                instance_id: tenant.instanceId,
                phone_number_id: tenant.phoneNumberId,
                to: TO,
                status: "sent",
                wa_message_id: record?.waMessageId,
                attempts: 0,
                at: expect.any(String)
              }
            }]
          }]
        })
        yield* refuseSends(tenant.phoneNumberId, 131030, "Recipient not allowed")
        const refused = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("told, refused"),
          headers: respondAsync
        })
        const [, failed] = yield* named.waitFor("the failed outcome", (r) => r.length === 2)
        expect(JSON.parse(failed?.body ?? "").entry[0].changes[0].value).toMatchObject({
          message_id: refused.body.id,
          status: "failed",
          failure_reason: "refused",
          error: { kind: "graph", code: 131030 }
        })
        expect(yield* deliveriesTyped(tenant.instanceToken, allHook.id)).toEqual([])
        expect(yield* deliveriesTyped(tenant.instanceToken, namedHook.id)).toHaveLength(2)
      }))

    it.effect("an Idempotency-Key answers the first 202 again and queues once", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const request = {
          token: tenant.instanceToken,
          json: { ...text("once"), send_at: new Date(Date.now() + 3_600_000).toISOString() },
          headers: { "idempotency-key": "queue-once-1" }
        }
        const first = yield* hub.request("POST", "/api/messages", request)
        const second = yield* hub.request("POST", "/api/messages", request)
        expect(first.status).toBe(202)
        expect(second.status).toBe(202)
        expect(second.headers.get("idempotent-replayed")).toBe("true")
        expect(second.headers.get("preference-applied")).toBe("respond-async")
        expect(second.body).toEqual(first.body)
        const client = yield* hub.client(tenant.instanceToken)
        expect((yield* client.messages.list({ urlParams: messagesFirstPage })).total).toBe(1)
      }))
  })
})

layer(testHubOnFakeGraph({ sendRateCap: 1, queueMaxHours: 0.001 }), { excludeTestServices: true })(
  "a number's queue is bounded",
  (it) => {
    it.effect("past HUB_QUEUE_MAX_HOURS of the number's throughput: 429 with Retry-After from the depth", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const later = new Date(Date.now() + 3_600_000).toISOString()
        // 0.001 h at 1 a second: 3 sends.
        for (let i = 0; i < 3; i++) {
          const queued = yield* hub.request("POST", "/api/messages", {
            token: tenant.instanceToken,
            json: { ...text(`n${i}`), send_at: later }
          })
          expect(queued.status).toBe(202)
        }
        const full = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text("one too many"), send_at: later }
        })
        expect(full.status).toBe(429)
        expect(full.headers.get("retry-after")).toBe("1")
        expect(full.body).toMatchObject({ statusCode: 429, error: "queue_full" })
      }))
  }
)

// The hub's clock is the TestClock here: a replica looks at a number's stored level again after a few seconds.
layer(testHubOnFakeGraph())("a number's live throughput level", (it) => {
  it.effect("is read from the Graph before the number's first send, shown as its send_rate, and read again after a THROUGHPUT_UPGRADE", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const levelRead = { method: "GET", path: `/${tenant.phoneNumberId}` }
      const client = yield* hub.client(tenant.orgToken)
      const sendRate = Effect.map(client.instances.list(), (list) => list.data[0]?.send_rate)
      // Before any read the standard level is assumed.
      expect(yield* sendRate).toBe(80)
      yield* sendTyped(tenant.instanceToken, { ...individualMessage, to: TO, type: "text", text: { body: "first" } })
      const reads = Effect.map(
        fake.requests,
        (requests) => requests.filter((r) => r.method === "GET" && r.query.fields === "throughput")
      )
      expect(yield* reads).toHaveLength(1)
      expect(yield* sendRate).toBe(80)

      // Meta upgrades the number (its webhook names no phone number id): the level is read again at the next use.
      yield* fake.respond(levelRead, { body: { throughput: { level: "HIGH" }, id: tenant.phoneNumberId } })
      yield* postUpstream(envelope([tenant.wabaId, [{
        field: "phone_number_quality_update",
        value: { display_phone_number: "15550001234", event: "THROUGHPUT_UPGRADE", old_limit: "TIER_10K" }
      }]]))
      yield* sendTyped(tenant.instanceToken, { ...individualMessage, to: TO, type: "text", text: { body: "second" } })
      // Within the replica's few seconds of trust nothing is read.
      expect(yield* reads).toHaveLength(1)
      yield* TestClock.adjust(Duration.seconds(6))
      yield* sendTyped(tenant.instanceToken, { ...individualMessage, to: TO, type: "text", text: { body: "third" } })
      expect(yield* reads).toHaveLength(2)
      expect(yield* sendRate).toBe(1000)
    }))
})

describe.each(["sqlite", "postgres"] as const)("queued sends' order (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })("", (it) => {
    it.effect("one person's sends go out in the order accepted", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        for (const body of ["first", "second", "third", "fourth"]) {
          const queued = yield* hub.request("POST", "/api/messages", {
            token: tenant.instanceToken,
            json: text(body),
            headers: respondAsync
          })
          expect(queued.status).toBe(202)
        }
        yield* recordsOnceSettled(tenant.instanceToken, "all four accepted", (records) =>
          records.length === 4 && records.every((r) =>
            typeof r.waMessageId === "string"
          ))
        const sent = yield* messageSends(tenant.phoneNumberId)
        expect(sent.map((s) => decodeText(s.json).text.body)).toEqual(["first", "second", "third", "fourth"])
      }))

    it.effect("Meta's pair rate (131056) holds back only that person: another's send goes meanwhile", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        yield* refuseSends(tenant.phoneNumberId, 131056, "Pair rate limit hit")
        yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("to A", "16505550101"),
          headers: respondAsync
        })
        // A's first try is refused; B is queued only then.
        yield* untilSignalledThat(
          settled,
          "A's first try",
          messageSends(tenant.phoneNumberId),
          (sends) => sends.length === 1
        )
        yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: text("to B", "16505550102"),
          headers: respondAsync
        })
        yield* recordsOnceSettled(
          tenant.instanceToken,
          "both accepted",
          (records) => records.length === 2 && records.every((r) => typeof r.waMessageId === "string")
        )
        const sent = yield* messageSends(tenant.phoneNumberId)
        expect(sent.map((s) => decodeText(s.json).to)).toEqual(["16505550101", "16505550102", "16505550101"])
      }))
  })
})

layer(testHubOnFakeGraph({ sendRateCap: 1 }), { excludeTestServices: true })("queued sends' lanes", (it) => {
  it.effect("a number's transactional sends go before its bulk ones", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const sendAt = new Date(Date.now() + 1_500).toISOString()
      for (const [i, priority] of (["bulk", "bulk", "transactional"] as const).entries()) {
        const queued = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { ...text(`${priority} ${i}`, `1650555020${i}`), priority, send_at: sendAt }
        })
        expect(queued.status).toBe(202)
      }
      yield* recordsOnceSettled(tenant.instanceToken, "all three accepted", (records) =>
        records.length === 3 && records.every((r) =>
          typeof r.waMessageId === "string"
        ))
      const sent = yield* messageSends(tenant.phoneNumberId)
      expect(sent.map((s) => decodeText(s.json).text.body)).toEqual(["transactional 2", "bulk 0", "bulk 1"])
    }))
})

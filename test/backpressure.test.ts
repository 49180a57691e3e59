/**
 * Backpressure: past HUB_INGRESS_MAX_PENDING upstream posts waiting for their commit, or
 * HUB_SEND_MAX_IN_FLIGHT sends in flight, the hub answers 503 with Retry-After at once instead of
 * queueing without limit; whatever it answered 200 is stored and delivered, nothing is lost.
 * The overload is made deterministic: the database's writer is held by a transaction the test
 * releases, and the fake Graph API holds its answers until the test lets them go.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Queue, Redacted } from "effect"
import { WriteBatcher } from "../src/Sql/WriteBatcher.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { makeReceiver } from "./support/Receivers.js"
import { type HttpResult, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, signBody, wamid } from "./support/UpstreamPayloads.js"

const APP_SECRET = "backpressure-app-secret"

const inboundPost = (tenant: { readonly phoneNumberId: string; readonly wabaId: string }, id: string) =>
  JSON.stringify(envelope([tenant.wabaId, [inboundChange(tenant, {
    from: "16505551234",
    id,
    timestamp: "1750263773",
    type: "text",
    text: { body: `hello ${id}` }
  })]]))

/** Holds the database's writer (one open transaction) until `release` completes; returns once it is held. */
const holdWriter = Effect.gen(function*() {
  const batcher = yield* WriteBatcher
  const held = yield* Deferred.make<void>()
  const release = yield* Deferred.make<void>()
  const fiber = yield* Effect.fork(
    batcher.run(Effect.zipRight(Deferred.succeed(held, undefined), Deferred.await(release)))
  )
  yield* Deferred.await(held)
  return { release: Effect.zipRight(Deferred.succeed(release, undefined), Fiber.join(fiber)) }
})

layer(testHub({ appSecret: Option.some(Redacted.make(APP_SECRET)), ingressMaxPending: 3 }), {
  excludeTestServices: true
})(
  "upstream posts past HUB_INGRESS_MAX_PENDING",
  (it) => {
    it.scoped("are refused with 503 and Retry-After while the others wait; every post answered 200 is stored and delivered", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        const created = yield* hub.request("POST", "/api/webhooks", {
          token: tenant.instanceToken,
          json: { url: receiver.url, name: "r" }
        })
        expect(created.status).toBe(201)

        const writer = yield* holdWriter
        const ids = Array.from({ length: 6 }, () => wamid())
        const post = (id: string) => {
          const body = inboundPost(tenant, id)
          return hub.request("POST", "/upstream/events", {
            body,
            headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
          })
        }
        // All six are sent at once; three wait for the held commit, the others are refused at once,
        // which the test waits for before it lets the commit go.
        const answered = yield* Queue.unbounded<readonly [string, HttpResult]>()
        const inFlight = yield* Effect.fork(
          Effect.forEach(ids, (id) => Effect.flatMap(post(id), (answer) => Queue.offer(answered, [id, answer])), {
            concurrency: "unbounded"
          })
        )
        const refusals = yield* Queue.takeBetween(answered, 3, 3)
        expect([...refusals].map(([, answer]) => answer.status)).toEqual([503, 503, 503])
        for (const [, answer] of refusals) {
          expect(answer.headers.get("retry-after")).toBe("1")
          expect(answer.body).toMatchObject({ statusCode: 503, error: "overloaded" })
        }
        yield* writer.release
        yield* Fiber.join(inFlight)
        const rest = yield* Queue.takeAll(answered)
        expect([...rest].map(([, answer]) => answer.status)).toEqual([200, 200, 200])
        const accepted = [...rest].map(([id]) => id)

        // Nothing answered 200 is lost: stored, recorded and delivered.
        const delivered = yield* receiver.waitFor("the accepted posts' deliveries", (requests) => requests.length >= 3)
        const deliveredIds = delivered.flatMap((request) => accepted.filter((id) => request.body.includes(id)))
        expect([...deliveredIds].sort()).toEqual([...accepted].sort())
        const stored = yield* sql<
          { readonly wa_message_id: string }
        >`SELECT wa_message_id FROM messages WHERE instance_id = ${tenant.instanceId}`
        expect(stored.map((row) => row.wa_message_id).sort()).toEqual([...accepted].sort())

        // The upstream retries what was refused; with room again, those are accepted too.
        const retried = yield* Effect.forEach(ids.filter((id) => !accepted.includes(id)), post)
        expect(retried.map((answer) => answer.status)).toEqual([200, 200, 200])
        yield* receiver.waitFor("every post's delivery", (requests) => requests.length >= 6)
      }))
  }
)

layer(testHubOnFakeGraph({ sendMaxInFlight: 2 }), { excludeTestServices: true })(
  "sends past HUB_SEND_MAX_IN_FLIGHT",
  (it) => {
    it.effect("are refused with 503 and Retry-After without reaching the upstream; the sends in flight complete and are recorded", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        const gate = Promise.withResolvers<void>()
        const accepted = (id: string) => ({
          messaging_product: "whatsapp",
          contacts: [{ input: "x", wa_id: "x" }],
          messages: [{ id }]
        })
        yield* fake.respond(
          { method: "POST", path: /\/messages$/ },
          { after: gate.promise, body: accepted(wamid()) },
          1
        )
        yield* fake.respond(
          { method: "POST", path: /\/messages$/ },
          { after: gate.promise, body: accepted(wamid()) },
          1
        )
        const send = (n: number) =>
          hub.request("POST", "/api/messages", {
            token: tenant.instanceToken,
            json: { to: `1650555${String(n).padStart(4, "0")}`, type: "text", text: { body: `message ${n}` } }
          })
        const held = yield* Effect.fork(Effect.all([send(1), send(2)], { concurrency: "unbounded" }))
        // Both held sends have reached the upstream (after the number's level was read): the hub now has two in flight.
        yield* fake.waitForRequests(3)
        const refused = yield* send(3)
        expect(refused.status).toBe(503)
        expect(refused.headers.get("retry-after")).toBe("1")
        expect(refused.body).toMatchObject({ statusCode: 503, error: "overloaded" })
        expect((yield* fake.requests).filter((r) => r.method === "POST")).toHaveLength(2)
        expect(yield* fake.requests).toHaveLength(3)
        gate.resolve()
        const answers = yield* Fiber.join(held)
        expect(answers.map((answer) => answer.status)).toEqual([200, 200])
        const records = yield* sql<{ readonly to_number: string; readonly wa_message_id: string | null }>`
        SELECT to_number, wa_message_id FROM messages WHERE instance_id = ${tenant.instanceId} ORDER BY to_number`
        expect(records.map((row) => row.to_number)).toEqual(["16505550001", "16505550002"])
        expect(records.every((row) => row.wa_message_id !== null)).toBe(true)
        // Room again: the next send goes through.
        expect((yield* send(4)).status).toBe(200)
      }))
  }
)

layer(testHubOnFakeGraph({ sendMaxInFlight: 10, sendMaxInFlightPerOrganization: 2 }), { excludeTestServices: true })(
  "sends past HUB_SEND_MAX_IN_FLIGHT_PER_ORGANIZATION",
  (it) => {
    it.effect("one organization at its bound gets 503 while another organization's send goes through", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const busy = yield* seedTenant()
        const other = yield* seedTenant()
        const gate = Promise.withResolvers<void>()
        const accepted = () => ({
          messaging_product: "whatsapp",
          contacts: [{ input: "x", wa_id: "x" }],
          messages: [{ id: wamid() }]
        })
        yield* fake.respond({ method: "POST", path: `/${busy.phoneNumberId}/messages` }, {
          after: gate.promise,
          body: accepted()
        }, 2)
        const send = (tenant: typeof busy, n: number) =>
          hub.request("POST", "/api/messages", {
            token: tenant.instanceToken,
            json: { to: `1650555${String(n).padStart(4, "0")}`, text: { body: `m ${n}` } }
          })
        const held = yield* Effect.fork(Effect.all([send(busy, 1), send(busy, 2)], { concurrency: "unbounded" }))
        yield* fake.waitForRequests(2)
        const refused = yield* send(busy, 3)
        expect(refused.status).toBe(503)
        expect(refused.headers.get("retry-after")).toBe("1")
        expect(refused.body).toMatchObject({
          error: "overloaded",
          message: expect.stringContaining("HUB_SEND_MAX_IN_FLIGHT_PER_ORGANIZATION")
        })
        // The other organization is not held back by the first one's slow calls.
        expect((yield* send(other, 4)).status).toBe(200)
        gate.resolve()
        expect((yield* Fiber.join(held)).map((answer) => answer.status)).toEqual([200, 200])
        expect((yield* send(busy, 5)).status).toBe(200)
      }))
  }
)

/**
 * POST/GET /upstream/events and POST /sandbox/inbound through the real HTTP server: handshake,
 * signature, routing of every entry and change, tenant isolation, dedupe, message side effects,
 * and the sandbox's events reaching webhooks.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, Either, Exit, Fiber, Layer, Option, Redacted, Scope } from "effect"
import { hubConfigWith } from "../src/Config.js"
import { DispatchSignal } from "../src/Delivery/DispatchSignal.js"
import { Enqueue } from "../src/Delivery/Enqueue.js"
import { Handoff } from "../src/Delivery/Handoff.js"
import { OutboxRepo } from "../src/Delivery/Outbox.js"
import { LiveEvents } from "../src/LiveEvents/LiveEvents.js"
import { MessagesRepo } from "../src/Messages/Repo.js"
import { Metrics } from "../src/Metrics/Metrics.js"
import { immediateSandbox } from "../src/Sandbox/Upstream.js"
import { sqliteLayer } from "../src/Sql/Client.js"
import { PgListener } from "../src/Sql/Notify.js"
import { WriteBatcher, writeBatcherLayer, WriteBatcherLive } from "../src/Sql/WriteBatcher.js"
import { type IngestAnswer, Ingress } from "../src/UpstreamEvents/Ingress.js"
import { type Engine, engines, testDatabase } from "./support/Databases.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { itemsOf, seedTenant, type Tenant, TEST_RETENTION, TestHub, testHub } from "./support/TestHub.js"
import {
  envelope,
  inboundChange,
  META_MESSAGES,
  signBody,
  status,
  statusChange,
  wamid
} from "./support/UpstreamPayloads.js"

const APP_SECRET = "app-secret-for-tests"
const VERIFY_TOKEN = "verify-token-3f9a"

const signedHub = (engine: Engine) =>
  testHub({
    engine,
    appSecret: Option.some(Redacted.make(APP_SECRET)),
    verifyToken: Option.some(Redacted.make(VERIFY_TOKEN)),
    // Sends get no sandbox status events during these tests; the tests post their own.
    sandboxStatusDelay: Duration.hours(1)
  })

/** Posts a payload to /upstream/events signed with the app secret, as the upstream does. */
const postEvents = (payload: unknown, options: { readonly signature?: string | null } = {}) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const body = typeof payload === "string" ? payload : JSON.stringify(payload)
    const signature = options.signature === undefined ? signBody(APP_SECRET, body) : options.signature
    return yield* hub.request("POST", "/upstream/events", {
      body,
      headers: {
        "content-type": "application/json",
        ...(signature === null ? {} : { "x-hub-signature-256": signature })
      }
    })
  })

const webhookTo = (tenant: Tenant, url: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const created = yield* hub.request("POST", "/api/webhooks", {
      token: tenant.instanceToken,
      json: { url, name: "receiver" }
    })
    expect(created.status).toBe(201)
    return String(created.body.id)
  })

const bodyOf = (request: ReceivedRequest | undefined): unknown => JSON.parse(request?.body ?? "null")

const sendText = (tenant: Tenant) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const sent = yield* hub.request("POST", "/api/messages", {
      token: tenant.instanceToken,
      json: { messaging_product: "whatsapp", to: "16505551234", type: "text", text: { body: "hi" } }
    })
    expect(sent.status).toBe(200)
    return String(itemsOf(sent.body, "messages")[0]?.id)
  })

const messageByWamid = (tenant: Tenant, id: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const listed = yield* hub.request("GET", `/api/messages?waMessageId=${encodeURIComponent(id)}`, {
      token: tenant.instanceToken
    })
    const data = itemsOf(listed.body)
    expect(data.length).toBe(1)
    return data[0] ?? {}
  })

for (const engine of engines) {
  layer(signedHub(engine), { excludeTestServices: true })(
    `upstream events with an app secret and a verify token (${engine})`,
    (it) => {
      it.effect("the handshake echoes hub.challenge as text only for mode subscribe and the right token", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const ok = yield* hub.request(
            "GET",
            `/upstream/events?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444`
          )
          expect(ok.status).toBe(200)
          expect(ok.text).toBe("1158201444")
          expect(ok.headers.get("content-type")).toContain("text/plain")
          for (
            const query of [
              `hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1`,
              `hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}x&hub.challenge=1`,
              `hub.mode=unsubscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1`,
              `hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1`,
              `hub.mode=subscribe&hub.challenge=1`,
              ""
            ]
          ) {
            const refused = yield* hub.request("GET", `/upstream/events?${query}`)
            expect(refused.status, query).toBe(403)
            expect(refused.body).toMatchObject({ statusCode: 403, error: "verification_failed" })
            expect(refused.text).not.toContain("1158201444")
          }
        }))

      it.scoped("a valid signature is accepted; an invalid or missing one is 401 and stores nothing", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          yield* webhookTo(tenant, receiver.url)
          const payload = envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
          const body = JSON.stringify(payload)
          const count = Effect.map(
            sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM event_changes`,
            (rows) => Number(rows[0]?.n)
          )
          const before = yield* count

          const cases = [
            ["wrong secret", signBody("another-secret", body)],
            ["missing", null],
            ["not hex", "sha256=zz"],
            ["other scheme", signBody(APP_SECRET, body).replace("sha256=", "sha1=")],
            ["other bytes", signBody(APP_SECRET, JSON.stringify(payload, null, 1))]
          ] as const
          for (const [name, signature] of cases) {
            const refused = yield* postEvents(body, { signature })
            expect(refused.status, name).toBe(401)
            expect(refused.text, name).toBe(JSON.stringify({ statusCode: 401, message: "Unauthorized" }))
          }
          expect(yield* count).toBe(before)
          expect(receiver.requests.length).toBe(0)

          const accepted = yield* postEvents(body)
          expect(accepted.status).toBe(200)
          expect(accepted.body).toEqual({
            changes: 1,
            accepted: 1,
            duplicates: 0,
            unrouted: 0,
            deliveries: 1,
            stale: 0
          })
          yield* receiver.waitFor("the delivery", (r) => r.length === 1)
          expect(bodyOf(receiver.requests[0])).toEqual(payload)
        }))

      it.effect("the signature covers the exact bytes, non-ASCII escapes included", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          // Meta sends non-ASCII as \uXXXX escapes and signs that form.
          const body = JSON.stringify(
            envelope([tenant.wabaId, [
              inboundChange(tenant, { ...META_MESSAGES.text, id: wamid(), text: { body: "Olá 👍" } })
            ]])
          )
            .replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
          expect(body).toContain("\\ud83d\\udc4d")
          expect((yield* postEvents(body)).status).toBe(200)
          const unescaped = body.replace("Ol\\u00e1", "Olá")
          expect((yield* postEvents(unescaped, { signature: signBody(APP_SECRET, body) })).status).toBe(401)
        }))

      it.effect("malformed JSON is 400 and an envelope of the wrong shape names what is wrong", () =>
        Effect.gen(function*() {
          const malformed = yield* postEvents("{\"object\":")
          expect(malformed.status).toBe(400)
          expect(malformed.body).toMatchObject({ statusCode: 400, error: "malformed_body" })
          const noEntry = yield* postEvents({ object: "whatsapp_business_account" })
          expect(noEntry.status).toBe(400)
          expect(noEntry.body).toMatchObject({
            error: "validation_failed",
            details: [{ field: "entry", message: "must be an array" }]
          })
          const badChanges = yield* postEvents({
            object: "whatsapp_business_account",
            entry: [{ id: "1", changes: [{ field: "messages" }] }, 7]
          })
          expect(badChanges.status).toBe(400)
          expect(badChanges.body.details).toEqual([
            { field: "entry.0.changes.0.value", message: "must be an object" },
            { field: "entry.1", message: "must be an object" }
          ])
        }))

      it.scoped("every entry and change is routed: each organization receives only its own changes, unknown numbers are kept aside", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const sql = yield* SqlClient.SqlClient
          const alice = yield* seedTenant()
          const bob = yield* seedTenant()
          const aliceHook = yield* makeReceiver()
          const bobHook = yield* makeReceiver()
          yield* webhookTo(alice, aliceHook.url)
          yield* webhookTo(bob, bobHook.url)
          const stranger = { phoneNumberId: "999000111222333", wabaId: "888000111222333" }
          const ids = { text: wamid(), location: wamid(), order: wamid(), buttonReply: wamid(), sent: wamid() }
          const aliceText = inboundChange(alice, { ...META_MESSAGES.text, id: ids.text }, {
            ...META_MESSAGES.location,
            id: ids.location
          })
          const aliceStatus = statusChange(alice, status(ids.sent, "delivered", 1750263780))
          const aliceLater = inboundChange(alice, { ...META_MESSAGES.buttonReply, id: ids.buttonReply })
          const bobOrder = inboundChange(bob, { ...META_MESSAGES.order, id: ids.order })
          const strangers = statusChange(stranger, status(wamid(), "read", 1750263790))
          const payload = envelope(
            [alice.wabaId, [aliceText, aliceStatus]],
            [bob.wabaId, [bobOrder]],
            [stranger.wabaId, [strangers]],
            [alice.wabaId, [aliceLater]]
          )
          const answer = yield* postEvents(payload)
          expect(answer.status).toBe(200)
          expect(answer.body).toEqual({ changes: 5, accepted: 4, duplicates: 0, unrouted: 1, deliveries: 2, stale: 0 })

          const [aliceGot] = yield* aliceHook.waitFor("alice's delivery", (r) => r.length === 1)
          const [bobGot] = yield* bobHook.waitFor("bob's delivery", (r) => r.length === 1)
          // One delivery per instance and upstream post, holding all of its changes and nothing else,
          // in the upstream's own entries (alice's two stay two).
          expect(bodyOf(aliceGot)).toEqual(
            envelope([alice.wabaId, [aliceText, aliceStatus]], [alice.wabaId, [aliceLater]])
          )
          expect(bodyOf(bobGot)).toEqual(envelope([bob.wabaId, [bobOrder]]))
          expect(bobGot?.body).not.toContain(alice.phoneNumberId)
          expect(aliceGot?.body).not.toContain(stranger.phoneNumberId)

          const unrouted = yield* sql<
            { readonly phone_number_id: string; readonly waba_id: string; readonly change_json: string }
          >`
        SELECT phone_number_id, waba_id, change_json FROM unrouted_events WHERE phone_number_id = ${stranger.phoneNumberId}`
          expect(unrouted.length).toBe(1)
          expect(unrouted[0]?.waba_id).toBe(stranger.wabaId)
          expect(JSON.parse(unrouted[0]?.change_json ?? "null")).toEqual(strangers)

          // Inbound messages of every routed change became records, each in its own organization.
          const aliceInbound = yield* hub.request("GET", "/api/messages?direction=inbound", { token: alice.orgToken })
          expect(itemsOf(aliceInbound.body).map((m) => [m.waMessageId, m.type, m.to, m.direction]).sort())
            .toEqual([
              [ids.buttonReply, "interactive", "16505551234", "inbound"],
              [ids.location, "location", "16505551234", "inbound"],
              [ids.text, "text", "16505551234", "inbound"]
            ].sort())
          const bobInbound = yield* hub.request("GET", "/api/messages?direction=inbound", { token: bob.orgToken })
          expect(itemsOf(bobInbound.body).map((m) => [m.waMessageId, m.type])).toEqual([[ids.order, "order"]])
        }))

      it.scoped("a change delivered twice is stored and fanned out once; a batch mixing old and new delivers only the new", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          const webhookId = yield* webhookTo(tenant, receiver.url)
          const first = statusChange(tenant, status(wamid(), "sent", 1750263773))
          const payload = envelope([tenant.wabaId, [first]])
          expect((yield* postEvents(payload)).body).toMatchObject({ accepted: 1, deliveries: 1 })
          expect((yield* postEvents(payload)).body).toEqual({
            changes: 1,
            accepted: 0,
            duplicates: 1,
            unrouted: 0,
            deliveries: 0,
            stale: 0
          })

          const second = inboundChange(tenant, { ...META_MESSAGES.listReply, id: wamid() })
          const mixed = yield* postEvents(envelope([tenant.wabaId, [first, second, second]]))
          expect(mixed.body).toEqual({ changes: 3, accepted: 1, duplicates: 2, unrouted: 0, deliveries: 1, stale: 0 })

          const got = yield* receiver.waitFor("two deliveries", (r) => r.length === 2)
          expect(got.map(bodyOf)).toEqual([payload, envelope([tenant.wabaId, [second]])])
          const log = yield* hub.request("GET", `/api/webhooks/${webhookId}/deliveries`, {
            token: tenant.instanceToken
          })
          expect(log.body.total).toBe(2)
          const inbound = yield* hub.request("GET", "/api/messages?direction=inbound", { token: tenant.instanceToken })
          expect(inbound.body.total).toBe(1)
        }))

      it.scoped("posts arriving together are written together: a change posted many times at once is stored and delivered once", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          const webhookId = yield* webhookTo(tenant, receiver.url)
          const repeated = envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
          const distinct = Array.from(
            { length: 5 },
            () => envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263774))]])
          )
          const answers = yield* Effect.forEach(
            [...Array.from({ length: 5 }, () => repeated), ...distinct],
            (payload) => postEvents(payload),
            {
              concurrency: "unbounded"
            }
          )
          expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 10 }, () => 200))
          const total = (key: string) => answers.reduce((n, a) => n + Number(a.body[key]), 0)
          expect([total("changes"), total("accepted"), total("duplicates"), total("deliveries")]).toEqual([10, 6, 4, 6])
          // Each answer speaks for its own post: one accepted copy of the repeated change, four duplicates.
          expect(answers.slice(0, 5).map((a) => a.body.accepted).sort()).toEqual([0, 0, 0, 0, 1])

          const got = yield* receiver.waitFor("six deliveries", (r) => r.length === 6)
          expect(new Set(got.map(bodyOf).map((b) => JSON.stringify(b)))).toEqual(
            new Set([repeated, ...distinct].map((p) => JSON.stringify(p)))
          )
          // The dispatcher logs attempts just after the receivers answer.
          yield* untilAttemptsLogged(
            "six deliveries logged as succeeded",
            hub.request("GET", `/api/webhooks/${webhookId}/deliveries?status=succeeded`, {
              token: tenant.instanceToken
            }),
            (log) => log.body.total === 6
          )
        }))

      it.effect("status events move a message forward only, whatever order they arrive in; a failure keeps the upstream error", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* seedTenant()
          const first = yield* sendText(tenant)
          expect((yield* messageByWamid(tenant, first)).status).toBe("pending")
          const post = (...statuses: ReadonlyArray<ReturnType<typeof status>>) =>
            postEvents(envelope([tenant.wabaId, [statusChange(tenant, ...statuses)]]))

          yield* post(status(first, "read", 1750263800))
          yield* post(status(first, "delivered", 1750263790))
          yield* post(status(first, "sent", 1750263780))
          expect((yield* messageByWamid(tenant, first)).status).toBe("read")
          const failedAfterRead = { code: 131026, title: "Message undeliverable" }
          yield* post(status(first, "failed", 1750263810, { errors: [failedAfterRead] }))
          expect((yield* messageByWamid(tenant, first)).status).toBe("read")

          const second = yield* sendText(tenant)
          const error = {
            code: 131047,
            title: "Re-engagement message",
            message: "Re-engagement message",
            error_data: {
              details:
                "Message failed to send because more than 24 hours have passed since the customer last replied to this number."
            }
          }
          yield* post(status(second, "sent", 1750263780))
          yield* post(status(second, "failed", 1750263790, { errors: [error] }))
          yield* post(status(second, "delivered", 1750263785), status(second, "sent", 1750263781))
          expect((yield* messageByWamid(tenant, second)).status).toBe("failed")
          const stored = yield* sql<
            { readonly error: string }
          >`SELECT error FROM messages WHERE wa_message_id = ${second}`
          expect(JSON.parse(stored[0]?.error ?? "null")).toEqual(error)
        }))

      it.scoped("one post of many statuses, inbound messages and an echo records each one, in one delivery of it all", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          yield* webhookTo(tenant, receiver.url)
          const known = [yield* sendText(tenant), yield* sendText(tenant), yield* sendText(tenant)]
          // Statuses of ids no record holds yet: each kept aside (PostgreSQL: one statement for all of them).
          const unknown = Array.from({ length: 300 }, () => wamid())
          const statuses = [
            ...known.flatMap((id) => [status(id, "sent", 1750263780), status(id, "delivered", 1750263790)]),
            ...unknown.map((id, i) => status(id, i % 2 === 0 ? "sent" : "read", 1750263700 + i))
          ]
          const inbound = [wamid(), wamid()].map((id, i) => ({
            from: "16505551234",
            id,
            timestamp: String(1750263800 + i),
            type: "text",
            text: { body: `question ${i}` }
          }))
          const echo = {
            from: "15550783881",
            to: "16505551234",
            id: wamid(),
            timestamp: "1750263900",
            type: "text",
            text: { body: "sent from the phone" }
          }
          const echoChange = {
            field: "smb_message_echoes",
            value: {
              messaging_product: "whatsapp",
              metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
              message_echoes: [echo]
            }
          }
          // The inbound messages come before the echo: its record still gets its `sent_at`.
          const payload = envelope([tenant.wabaId, [
            statusChange(tenant, ...statuses),
            inboundChange(tenant, ...inbound),
            echoChange
          ]])
          const answer = yield* postEvents(payload)
          expect(answer.status).toBe(200)
          expect(answer.body).toMatchObject({ changes: 3, accepted: 3, duplicates: 0, deliveries: 1 })
          for (const id of known) expect((yield* messageByWamid(tenant, id)).status).toBe("delivered")
          const kept = yield* sql<{ readonly wa_message_id: string; readonly status: string }>`
            SELECT wa_message_id, status FROM message_status_backlog WHERE instance_id = ${tenant.instanceId}`
          expect(new Map(kept.map((row) => [row.wa_message_id, row.status]))).toEqual(
            new Map(unknown.map((id, i) => [id, i % 2 === 0 ? "sent" : "read"]))
          )
          for (const message of inbound) {
            expect(yield* messageByWamid(tenant, message.id)).toMatchObject({
              direction: "inbound",
              status: "delivered"
            })
          }
          const echoed = yield* sql<
            { readonly direction: string; readonly status: string; readonly sent_at: string | null }
          >`
            SELECT direction, status, sent_at FROM messages WHERE wa_message_id = ${echo.id}`
          expect(echoed).toEqual([{ direction: "outbound", status: "sent", sent_at: "2025-06-18T16:25:00.000Z" }])
          const [got] = yield* receiver.waitFor("the post's one delivery", (r) => r.length === 1)
          expect(bodyOf(got)).toEqual(payload)
        }))

      it.scoped("account-level changes without a phone number id reach every instance of that business account", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          yield* webhookTo(tenant, receiver.url)
          const change = {
            field: "message_template_status_update",
            value: {
              event: "APPROVED",
              message_template_id: 1234567890,
              message_template_name: "order_update",
              message_template_language: "en_US",
              reason: "NONE"
            }
          }
          const answer = yield* postEvents(envelope([tenant.wabaId, [change]]))
          expect(answer.body).toMatchObject({ accepted: 1, unrouted: 0, deliveries: 1 })
          const [got] = yield* receiver.waitFor("the template update", (r) => r.length === 1)
          expect(bodyOf(got)).toEqual(envelope([tenant.wabaId, [change]]))
          expect((yield* postEvents(envelope([tenant.wabaId, [change]]))).body).toMatchObject({
            accepted: 0,
            duplicates: 1
          })
        }))

      it.scoped("POST /sandbox/inbound simulates an inbound message of any spec type, delivered like an upstream one", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          yield* webhookTo(tenant, receiver.url)
          const text = yield* hub.request("POST", "/sandbox/inbound", {
            token: tenant.instanceToken,
            json: { from: "+16505551234", type: "text", name: "Sheena Nelson", text: { body: "Does it come in blue?" } }
          })
          expect(text.status).toBe(200)
          expect(text.body).toEqual({ id: expect.stringMatching(/^wamid\./), deliveries: 1 })
          const [got] = yield* receiver.waitFor("the inbound text", (r) => r.length === 1)
          expect(bodyOf(got)).toMatchObject({
            object: "whatsapp_business_account",
            entry: [{
              id: tenant.wabaId,
              changes: [{
                field: "messages",
                value: {
                  metadata: { phone_number_id: tenant.phoneNumberId },
                  contacts: [{ profile: { name: "Sheena Nelson" }, wa_id: "16505551234" }],
                  messages: [{
                    from: "16505551234",
                    id: text.body.id,
                    type: "text",
                    text: { body: "Does it come in blue?" }
                  }]
                }
              }]
            }]
          })

          const byOrg = yield* hub.request("POST", "/sandbox/inbound", {
            token: tenant.orgToken,
            json: { from: "16505551234", type: "image", phone_number_id: tenant.phoneNumberId }
          })
          expect(byOrg.status).toBe(200)
          const [, image] = yield* receiver.waitFor("the inbound image", (r) => r.length === 2)
          const imageMessage = (bodyOf(image) as {
            entry: ReadonlyArray<
              { changes: ReadonlyArray<{ value: { messages: ReadonlyArray<{ image: { id: string } }> } }> }
            >
          })
            .entry[0]?.changes[0]?.value.messages[0]
          expect(imageMessage?.image.id).toMatch(/^\d+$/)

          const types = yield* hub.request("GET", "/api/messages?direction=inbound", { token: tenant.instanceToken })
          expect(itemsOf(types.body).map((m) => String(m.type)).sort()).toEqual(["image", "text"])

          const unnamed = yield* hub.request("POST", "/sandbox/inbound", {
            token: tenant.orgToken,
            json: { from: "16505551234", type: "text" }
          })
          expect(unnamed.status).toBe(400)
          expect(unnamed.body).toMatchObject({ error: "instance_required" })
          // The instance named by id, with a number that is not its own: not found, as another tenant's.
          const mismatched = yield* hub.request("POST", "/sandbox/inbound", {
            token: tenant.orgToken,
            json: {
              from: "16505551234",
              type: "text",
              text: { body: "x" },
              instance_id: tenant.instanceId,
              phone_number_id: "999999999999999"
            }
          })
          expect(mismatched.status).toBe(404)
          expect(mismatched.body).toMatchObject({ error: "not_found" })
          const invalid = yield* hub.request("POST", "/sandbox/inbound", {
            token: tenant.instanceToken,
            json: { from: "abc", type: "fax", text: { body: "" } }
          })
          expect(invalid.status).toBe(400)
          expect(itemsOf(invalid.body, "details").map((d) => d.field)).toEqual(["from", "type", "text.body"])
          expect(
            (yield* hub.request("POST", "/sandbox/inbound", { json: { from: "16505551234", type: "text" } })).status
          ).toBe(401)
        }))
    }
  )
}

for (const engine of engines) {
  layer(testHub({ engine }), { excludeTestServices: true })(
    `upstream events without app secret or verify token (${engine})`,
    (it) => {
      it.effect("unsigned posts are accepted; the handshake is refused since nothing can be verified", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const posted = yield* hub.request("POST", "/upstream/events", {
            json: envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
          })
          expect(posted.status).toBe(200)
          expect(posted.body).toMatchObject({ accepted: 1 })
          const handshake = yield* hub.request(
            "GET",
            "/upstream/events?hub.mode=subscribe&hub.verify_token=&hub.challenge=5"
          )
          expect(handshake.status).toBe(403)
          expect(String(handshake.body.message)).toContain("HUB_VERIFY_TOKEN is not set")
        }))
    }
  )
}

for (const engine of engines) {
  layer(testHub({ ...immediateSandbox, engine }), { excludeTestServices: true })(
    `sandbox end to end (${engine})`,
    (it) => {
      it.scoped("a send produces sent, delivered and read events that reach the webhook and the message record", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver()
          yield* webhookTo(tenant, receiver.url)
          const id = yield* sendText(tenant)
          const got = yield* receiver.waitFor("three status events", (r) => r.length === 3)
          const statuses = got.map((r) => {
            const value = (bodyOf(r) as {
              entry: ReadonlyArray<
                { changes: ReadonlyArray<{ value: { statuses: ReadonlyArray<{ id: string; status: string }> } }> }
              >
            })
              .entry[0]?.changes[0]?.value.statuses[0]
            return [value?.id, value?.status]
          })
          expect(statuses).toEqual([[id, "sent"], [id, "delivered"], [id, "read"]])
          expect((yield* messageByWamid(tenant, id)).status).toBe("read")
        }))
    }
  )
}

layer(testHub({ upstream: "graph", secretKey: Option.some(Redacted.make(new Uint8Array(32).fill(3))) }), {
  excludeTestServices: true
})(
  "sandbox routes outside the sandbox",
  (it) => {
    it.effect("POST /sandbox/inbound is 404 in graph mode", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const answer = yield* hub.request("POST", "/sandbox/inbound", {
          token: tenant.instanceToken,
          json: { from: "16505551234", type: "text" }
        })
        expect(answer.status).toBe(404)
        expect(answer.body).toMatchObject({ statusCode: 404, error: "route_not_found" })
      }))
  }
)

/** The ingress alone over an in-memory database, built in a scope the test closes itself. */
const ingressAlone = Ingress.Default.pipe(
  Layer.provide(
    Layer.mergeAll(
      OutboxRepo.Default,
      Enqueue.Default,
      MessagesRepo.Default,
      DispatchSignal.Default,
      Handoff.Default,
      hubConfigWith({ retention: TEST_RETENTION }),
      LiveEvents.None,
      Metrics.Off
    )
  ),
  Layer.provide(WriteBatcherLive),
  Layer.provide(Metrics.Off)
)

for (const engine of engines) {
  layer(testDatabase(engine), { excludeTestServices: true })(`the ingress when the hub stops (${engine})`, (it) => {
    it.effect("a payload still waiting for its group is answered as interrupted and not stored; one submitted after is answered so at once", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const scope = yield* Scope.make()
        const ingress = Context.get(yield* Layer.buildWithScope(ingressAlone, scope), Ingress)
        const checked = ingress.check(
          envelope(["100200300", [
            statusChange({ phoneNumberId: "100200301", wabaId: "100200300" }, status(wamid(), "sent", 1750263790))
          ]])
        )
        if (Either.isLeft(checked)) {
          return expect.fail(checked.left.message)
        }
        const outcomes: Array<Exit.Exit<IngestAnswer>> = []
        // The group would start on the next turn of the event loop; the scope closes before it.
        ingress.submit(checked.right, (outcome) => outcomes.push(outcome))
        yield* Scope.close(scope, Exit.void)
        ingress.submit(checked.right, (outcome) => outcomes.push(outcome))
        expect(outcomes.map(Exit.isInterrupted)).toEqual([true, true])
        expect(yield* sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM unrouted_events`).toEqual([
          { n: 0 }
        ])
      }))
  })
}

/** The ingress over a batcher whose gathering time no test outlasts, with that batcher. */
const ingressGathering = Ingress.Default.pipe(
  Layer.provide(
    Layer.mergeAll(
      OutboxRepo.Default,
      Enqueue.Default,
      MessagesRepo.Default,
      DispatchSignal.Default,
      Handoff.Default,
      hubConfigWith({ retention: TEST_RETENTION }),
      LiveEvents.None
    )
  ),
  Layer.provideMerge(writeBatcherLayer({ gatherMs: 60_000 })),
  Layer.provide(Layer.merge(Metrics.Off, PgListener.None))
)

layer(sqliteLayer(":memory:"), { excludeTestServices: true })("the ingress's groups", (it) => {
  it.scoped("payloads that arrive while a group gathers join it: one transaction, answered together", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const context = yield* Layer.build(ingressGathering)
      const ingress = Context.get(context, Ingress)
      const batcher = Context.get(context, WriteBatcher)
      const answers = new Map<string, Exit.Exit<IngestAnswer>>()
      const submit = (phoneNumberId: string) =>
        Effect.async<void>((resume) => {
          const checked = ingress.check(
            envelope(["100200300", [
              statusChange({ phoneNumberId, wabaId: "100200300" }, status(wamid(), "sent", 1750263790))
            ]])
          )
          if (Either.isLeft(checked)) return resume(Effect.dieMessage(checked.left.message))
          ingress.submit(checked.right, (outcome) => {
            answers.set(phoneNumberId, outcome)
            resume(Effect.void)
          })
        })
      const turns = Effect.promise(() => new Promise((done) => setImmediate(done)))

      // A quiet hub writes the first at once.
      yield* submit("555000001")
      const second = yield* Effect.fork(submit("555000002"))
      yield* turns
      const third = yield* Effect.fork(submit("555000003"))
      yield* turns
      yield* turns
      expect([...answers.keys()]).toEqual(["555000001"])

      // Another write begins the transaction: the gathering group takes both payloads waiting.
      yield* batcher.run(Effect.void)
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      expect([...answers.values()].map((a) => Exit.isSuccess(a) && a.value.unrouted)).toEqual([1, 1, 1])
      const stored = yield* sql<{ readonly phone_number_id: string; readonly received_at: string }>`
        SELECT phone_number_id, received_at FROM unrouted_events ORDER BY phone_number_id`
      expect(stored.map((r) => r.phone_number_id)).toEqual(["555000001", "555000002", "555000003"])
      expect(stored[1]?.received_at).toBe(stored[2]?.received_at)
    }))
})

/**
 * Webhook operations through the real HTTP server and real receivers: event filters, the webhook
 * limit per instance, custom headers, health on the record, recover and test events, and the
 * sandbox's simulated changes.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Duration, Effect, Either, Option, Redacted } from "effect"
import { isDeepStrictEqual } from "node:util"
import { Webhook } from "standardwebhooks"
import { errorBody } from "../src/Domain/Errors.js"
import { kindsOf, selectChanges } from "../src/Domain/EventKinds.js"
import { WebhookDeliveries } from "../src/Webhooks/Deliveries.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { refusedWith } from "./support/Refusal.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { addInstance, itemsOf, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import {
  createTyped,
  deliveriesTyped,
  type DeliveryFilters,
  postUpstream as post,
  readTyped,
  typedClient,
  updateTyped,
  type WebhookInput,
  type WebhookPatch
} from "./support/TypedWebhooks.js"
import { envelope, inboundChange, META_MESSAGES, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

/** POST /api/webhooks raw, for bodies the typed client refuses to encode (the hub's own refusal of them is under test). */
const createRaw = (token: string, json: Record<string, unknown>) =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", "/api/webhooks", { token, json }))

/** PATCH /api/webhooks/:id raw, for bodies the typed client refuses to encode. */
const patchRaw = (token: string, id: string, json: Record<string, unknown>) =>
  Effect.flatMap(TestHub, (hub) => hub.request("PATCH", `/api/webhooks/${id}`, { token, json }))

/** Creates a webhook of the tenant's instance (named "receiver" unless told) through the typed client; its id and secret. */
const createWebhook = (tenant: Tenant, payload: Omit<WebhookInput, "name"> & { readonly name?: string }) =>
  Effect.map(
    createTyped(tenant.instanceToken, { name: "receiver", ...payload }),
    (created) => ({ id: created.id, secret: created.secret, body: created })
  )

const read = (tenant: Tenant, webhookId: string) => readTyped(tenant.instanceToken, webhookId)

const deliveriesOf = (tenant: Tenant, webhookId: string, filters: Partial<DeliveryFilters> = {}) =>
  deliveriesTyped(tenant.instanceToken, webhookId, filters)

/** Reads until the condition holds on what `read` answers: at once, then each time attempts are logged (bounded by a deadline). */
const until = untilAttemptsLogged

const verify = (secret: string, request: ReceivedRequest | undefined) =>
  new Webhook(secret).verify(request?.body ?? "", {
    "webhook-id": request?.headers["webhook-id"] ?? "",
    "webhook-timestamp": request?.headers["webhook-timestamp"] ?? "",
    "webhook-signature": request?.headers["webhook-signature"] ?? ""
  })

const nowSeconds = () => Math.floor(Date.now() / 1000)

/** An account-level change: no phone number, routed by its business account (entry id). */
const accountUpdate = { field: "account_update", value: { phone_number: "15550783881", event: "VERIFIED_ACCOUNT" } }

/** A `messages` change carrying only errors. */
const errorsOnly = (tenant: Tenant) => ({
  field: "messages",
  value: {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
    errors: [{ code: 131000, title: "Something went wrong", message: "Something went wrong" }]
  }
})

layer(
  testHub({ webhookTimeout: Duration.seconds(2), webhookRetry: [Duration.millis(10)], webhooksPerInstance: 4 }),
  { excludeTestServices: true }
)("webhook operations", (it) => {
  it.scoped("a filtered webhook beside an unfiltered one receives only its kinds, each change unaltered; no matching change, no delivery", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const everything = yield* makeReceiver()
      const some = yield* makeReceiver()
      const callsOnly = yield* makeReceiver()
      const allHook = yield* createWebhook(tenant, { url: everything.url })
      const someHook = yield* createWebhook(tenant, { url: some.url, events: ["statuses", "account_update"] })
      const callsHook = yield* createWebhook(tenant, { url: callsOnly.url, events: ["calls"] })
      expect(someHook.body.events).toEqual(["account_update", "statuses"])
      expect(allHook.body.events).toEqual(["*"])

      const inbound = inboundChange(tenant, { ...META_MESSAGES.text, id: wamid() })
      const statuses = statusChange(tenant, status(wamid(), "delivered", nowSeconds()))
      const payload = envelope([tenant.wabaId, [inbound, statuses, accountUpdate, errorsOnly(tenant)]])
      expect(yield* post(payload)).toMatchObject({ accepted: 4, deliveries: 2 })

      const [whole] = yield* everything.waitFor("the whole event", (r) => r.length === 1)
      const [part] = yield* some.waitFor("its kinds", (r) => r.length === 1)
      expect(JSON.parse(whole?.body ?? "")).toEqual(payload)
      // The upstream's envelope minus the other changes, in their order, each exactly as received.
      expect(JSON.parse(part?.body ?? "")).toEqual(envelope([tenant.wabaId, [statuses, accountUpdate]]))
      expect(verify(someHook.secret, part)).toEqual(envelope([tenant.wabaId, [statuses, accountUpdate]]))
      expect(yield* deliveriesOf(tenant, callsHook.id)).toEqual([])
      // Only the partial delivery carries a body of its own; the others read their event's.
      const bodies = yield* sql<{ readonly webhook_id: string; readonly own: number }>`
        SELECT webhook_id, CASE WHEN body IS NULL THEN 0 ELSE 1 END AS own FROM deliveries WHERE webhook_id IN (${allHook.id}, ${someHook.id})`
      expect(Object.fromEntries(bodies.map((b) => [b.webhook_id, b.own]))).toEqual({
        [allHook.id]: 0,
        [someHook.id]: 1
      })

      // An event with only a kind it does not take makes no delivery for the filtered webhook.
      const onlyInbound = envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.location, id: wamid() })]])
      expect(yield* post(onlyInbound)).toMatchObject({ deliveries: 1 })
      yield* everything.waitFor("the inbound event", (r) => r.length === 2)

      // A re-send goes through a dispatcher round's lease, which reads the delivery's own body.
      const [partDelivery] = yield* deliveriesOf(tenant, someHook.id)
      yield* until(
        "the partial delivery succeeded",
        deliveriesOf(tenant, someHook.id),
        (d) => d[0]?.status === "succeeded"
      )
      const byOrg = yield* typedClient(tenant.orgToken)
      const resent = yield* byOrg.webhooks.retry({ path: { id: someHook.id, deliveryId: partDelivery?.id ?? "" } })
      expect(resent).toMatchObject({ id: partDelivery?.id, status: "pending" })
      const [, again] = yield* some.waitFor("the re-send", (r) => r.length === 2)
      expect(again?.body).toBe(part?.body)
      expect(again?.headers["webhook-id"]).toBe(part?.headers["webhook-id"])

      // Listing by kind; every webhook that takes all kinds is listed for any kind.
      const byKind = (event: string) =>
        Effect.map(byOrg.webhooks.list({ urlParams: { event } }), (list) => list.data.map((w) => w.id))
      expect(yield* byKind("statuses")).toEqual([allHook.id, someHook.id])
      expect(yield* byKind("calls")).toEqual([allHook.id, callsHook.id])
      expect(yield* byKind("messages")).toEqual([allHook.id])
      // A field of the upstream's form is a kind, known or not; anything else is a 400 (raw: the typed client refuses to encode it).
      expect(yield* byKind("some_future_field")).toEqual([allHook.id])
      const badKind = yield* hub.request("GET", "/api/webhooks?event=Not-A-Field", { token: tenant.orgToken })
      expect(badKind.status).toBe(400)
      expect(badKind.body).toMatchObject({ error: "validation_failed", details: [{ field: "event" }] })

      // PATCH ["*"] takes everything again.
      const widened = yield* updateTyped(tenant.instanceToken, callsHook.id, { events: ["*"] })
      expect(widened).toMatchObject({ events: ["*"] })
      const next = envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "read", nowSeconds()))]])
      expect(yield* post(next)).toMatchObject({ deliveries: 3 })
      const [got] = yield* callsOnly.waitFor("the widened webhook's first event", (r) => r.length === 1)
      expect(JSON.parse(got?.body ?? "")).toEqual(next)
    }))

  it.scoped("a filter may name any field of the upstream's form: a change of a field Meta adds later reaches the webhook naming it", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const naming = yield* makeReceiver()
      const other = yield* makeReceiver()
      yield* createWebhook(tenant, { url: naming.url, events: ["standby", "meta_future_field"] })
      yield* createWebhook(tenant, { url: other.url, events: ["statuses"] })
      const future = {
        field: "meta_future_field",
        value: { messaging_product: "whatsapp", metadata: { phone_number_id: tenant.phoneNumberId }, novelty: 1 }
      }
      const payload = envelope([tenant.wabaId, [future]])
      expect(yield* post(payload)).toMatchObject({ accepted: 1, deliveries: 1 })
      const [received] = yield* naming.waitFor("the new field's change", (r) => r.length === 1)
      expect(JSON.parse(received?.body ?? "")).toEqual(payload)
      expect(other.requests).toHaveLength(0)
    }))

  describe("raw requests: filters the typed client refuses to encode", () => {
    // Raw: malformed filters, which the typed client refuses to encode; the hub's refusal is under test.
    it.effect("malformed or empty event filters are refused with every failing kind named", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const unknown = yield* createRaw(tenant.instanceToken, {
          url: "https://example.com/f",
          name: "f",
          events: ["messages", "no-dash", "Statuses", "x".repeat(65)]
        })
        expect(unknown.status).toBe(400)
        expect(itemsOf(unknown.body, "details").map((d) => d.field)).toEqual(["events.1", "events.2", "events.3"])
        expect(String(itemsOf(unknown.body, "details")[0]?.message)).toContain(
          "must be \"*\" or a webhook field name of the upstream's form"
        )
        const empty = yield* createRaw(tenant.instanceToken, { url: "https://example.com/f", name: "f", events: [] })
        expect(empty.body).toMatchObject({
          statusCode: 400,
          details: [{ field: "events", message: "must name at least one kind (or \"*\" for all)" }]
        })
        const created = yield* createWebhook(tenant, { url: "https://example.com/f", events: ["*", "calls"] })
        expect(created.body.events).toEqual(["*"])
        const patched = yield* patchRaw(tenant.instanceToken, created.id, { events: ["Bogus!"] })
        expect(patched.status).toBe(400)
        expect(patched.body).toMatchObject({ error: "validation_failed", details: [{ field: "events.0" }] })
        expect((yield* read(tenant, created.id)).events).toEqual(["*"])
      }))
  })

  it.effect("an instance has at most HUB_WEBHOOKS_PER_INSTANCE webhooks, counted race-free; inactive ones count, deleted ones do not", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const byOrg = yield* typedClient(tenant.orgToken)
      const made = yield* Effect.all(
        Array.from(
          { length: 8 },
          (_, i) =>
            Effect.either(byOrg.webhooks.create({
              payload: { instance_id: tenant.instanceId, url: `https://example.com/${i}`, name: `n${i}` }
            }))
        ),
        { concurrency: "unbounded" }
      )
      expect(made.map((r) => (Either.isRight(r) ? "created" : r.left._tag)).sort()).toEqual([
        "Conflict",
        "Conflict",
        "Conflict",
        "Conflict",
        "created",
        "created",
        "created",
        "created"
      ])
      const refused = made.find(Either.isLeft)?.left
      expect(refused?._tag === "Conflict" ? errorBody(refused) : refused).toEqual({
        statusCode: 409,
        error: "webhook_limit_reached",
        message:
          `instance ${tenant.instanceId} already has 4 webhooks, the most an instance may have (HUB_WEBHOOKS_PER_INSTANCE=4); delete one first`
      })
      const listed = (yield* byOrg.webhooks.list({ urlParams: {} })).data
      expect(listed.length).toBe(4)
      const [first, second] = listed
      yield* byOrg.webhooks.update({ path: { id: first?.id ?? "" }, payload: { active: false } })
      const x = { url: "https://example.com/x", name: "x" }
      yield* refusedWith(createTyped(tenant.instanceToken, x), "Conflict")
      yield* byOrg.webhooks.remove({ path: { id: second?.id ?? "" } })
      expect((yield* createTyped(tenant.instanceToken, x)).url).toBe(x.url)
      // Another instance of the organization has its own count.
      const sibling = yield* addInstance(tenant)
      const y = yield* createTyped(sibling.instanceToken, { url: "https://example.com/y", name: "y" })
      expect(y.instance_id).toBe(sibling.instanceId)
    }))

  it.scoped("a URL moved to another origin drops the secret headers unless given again; credentials in a URL are refused", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const owners = yield* makeReceiver()
      const attacker = yield* makeReceiver()
      // The organization's webhook, with its organization token as a secret header.
      const created = yield* createTyped(tenant.orgToken, {
        url: `${owners.url}/hooks`,
        name: "owner's",
        instance_id: tenant.instanceId,
        headers: { authorization: `Bearer ${tenant.orgToken}`, "x-tenant": "acme" }
      })
      const id = created.id
      const patch = (payload: WebhookPatch) => updateTyped(tenant.instanceToken, id, payload)
      // Another path on the same origin keeps them.
      expect(yield* patch({ url: `${owners.url}/other` })).toMatchObject({
        headers: { authorization: "[redacted]", "x-tenant": "acme" }
      })
      // "[redacted]" cannot carry a secret to another origin: 400 naming it, nothing changed.
      const carried = yield* refusedWith(
        patch({ url: attacker.url, headers: { authorization: "[redacted]", "x-tenant": "acme" } }),
        "BadRequest"
      )
      expect(errorBody(carried)).toMatchObject({
        statusCode: 400,
        error: "validation_failed",
        details: [{
          field: "headers.authorization",
          message:
            "the url moves to another origin, so no stored value is kept; give its value instead of \"[redacted]\""
        }]
      })
      expect((yield* read(tenant, id)).url).toBe(`${owners.url}/other`)
      // An instance token points it at its own receiver: the secret header is dropped, the plain one kept.
      const moved = yield* patch({ url: attacker.url })
      expect(moved).toMatchObject({ url: attacker.url, headers: { "x-tenant": "acme" } })
      expect(moved.headers).not.toHaveProperty("authorization")
      yield* (yield* typedClient(tenant.instanceToken)).webhooks.test({ path: { id }, headers: {} })
      const [received] = yield* attacker.waitFor("the test event", (r) => r.length === 1)
      expect(received?.headers.authorization).toBeUndefined()
      expect(JSON.stringify(received?.headers)).not.toContain(tenant.orgToken)
      expect(received?.headers["x-tenant"]).toBe("acme")
      // Given again in the same request, a secret goes along.
      const regiven = yield* patch({ url: `${owners.url}/hooks`, headers: { authorization: "Bearer new-value" } })
      expect(regiven).toMatchObject({ headers: { authorization: "[redacted]" } })
      // Credentials in the URL itself are refused, at creation and on PATCH (raw: the typed client refuses to encode them).
      const withCredentials = `${owners.url.replace("http://", "http://user:pa55@")}/hooks`
      for (
        const answer of [
          yield* createRaw(tenant.instanceToken, { url: withCredentials, name: "creds" }),
          yield* patchRaw(tenant.instanceToken, id, { url: withCredentials })
        ]
      ) {
        expect(answer.status).toBe(400)
        expect(answer.body).toMatchObject({
          details: [{
            field: "url",
            message:
              "must not hold credentials (user:password@): credentials in URLs are not allowed; send them in a custom header such as authorization"
          }]
        })
      }
    }))

  it.scoped("custom headers arrive at the receiver; secret ones are stored encrypted and shown redacted; denied ones are refused", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver()
      const hook = yield* createWebhook(tenant, {
        url: receiver.url,
        headers: { Authorization: "Bearer s3cret-value", "X-Tenant": "acme", "x-api-key": "key-4711" }
      })
      expect(hook.body.headers).toEqual({ authorization: "[redacted]", "x-tenant": "acme", "x-api-key": "[redacted]" })
      expect((yield* read(tenant, hook.id)).headers).toEqual(hook.body.headers)
      const stored = JSON.stringify(yield* sql`SELECT * FROM webhooks WHERE id = ${hook.id}`)
      expect(stored).not.toContain("s3cret-value")
      expect(stored).not.toContain("key-4711")
      expect(stored).toContain("acme")

      const payload = envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]])
      yield* post(payload)
      const [request] = yield* receiver.waitFor("the delivery", (r) => r.length === 1)
      expect(request?.headers).toMatchObject({
        authorization: "Bearer s3cret-value",
        "x-tenant": "acme",
        "x-api-key": "key-4711"
      })
      expect(request?.headers["content-type"]).toBe("application/json")
      expect(verify(hook.secret, request)).toEqual(payload)

      // Raw: headers the typed client refuses to encode (denied, too many, twice); the hub's refusal is under test.
      const denied = yield* createRaw(tenant.instanceToken, {
        url: receiver.url,
        name: "bad",
        headers: {
          Host: "evil.example",
          "Content-Length": "0",
          "webhook-signature": "v1,forged",
          "Proxy-Authorization": "x",
          "bad name": "x",
          "x-injected": "a\r\nx-other: 1",
          "x-nul": "a\u0000b"
        }
      })
      expect(denied.status).toBe(400)
      expect(denied.body).toMatchObject({ error: "validation_failed", details: [{ field: "headers" }] })
      const message = String(itemsOf(denied.body, "details")[0]?.message)
      for (
        const part of [
          "header host",
          "header content-length",
          "header webhook-signature",
          "header proxy-authorization",
          "\"bad name\"",
          "x-injected",
          "x-nul"
        ]
      ) {
        expect(message).toContain(part)
      }
      const tooMany = yield* createRaw(tenant.instanceToken, {
        url: receiver.url,
        name: "many",
        headers: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`x-h${i}`, "v"]))
      })
      expect(tooMany.body).toMatchObject({
        statusCode: 400,
        details: [{ field: "headers", message: "at most 10 headers" }]
      })
      const twice = yield* createRaw(tenant.instanceToken, {
        url: receiver.url,
        name: "twice",
        headers: { "X-A": "1", "x-a": "2" }
      })
      expect(String(itemsOf(twice.body, "details")[0]?.message)).toBe("header x-a is given twice")

      // A secret given back as "[redacted]" keeps its stored value; the rest is replaced as given.
      const patchHeaders = (headers: Record<string, string>) => updateTyped(tenant.instanceToken, hook.id, { headers })
      const kept = yield* patchHeaders({ Authorization: "[redacted]", "x-tenant": "globex" })
      expect(kept).toMatchObject({ headers: { authorization: "[redacted]", "x-tenant": "globex" } })
      yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      const [, keptSent] = yield* receiver.waitFor("a delivery with the kept secret", (r) => r.length === 2)
      expect(keptSent?.headers).toMatchObject({ authorization: "Bearer s3cret-value", "x-tenant": "globex" })
      expect(keptSent?.headers["x-api-key"]).toBeUndefined()
      // A placeholder for a secret the webhook does not have is refused, and nothing changes.
      const nothingToKeep = yield* refusedWith(
        patchHeaders({ authorization: "[redacted]", "x-api-key": "[redacted]" }),
        "BadRequest"
      )
      expect(errorBody(nothingToKeep)).toMatchObject({
        statusCode: 400,
        error: "validation_failed",
        details: [{ field: "headers.x-api-key" }]
      })
      expect((yield* read(tenant, hook.id)).headers).toEqual({ authorization: "[redacted]", "x-tenant": "globex" })

      // PATCH replaces them all: {} removes them.
      const cleared = yield* patchHeaders({})
      expect(cleared.headers).toEqual({})
      yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      const [, , plain] = yield* receiver.waitFor("a delivery without headers", (r) => r.length === 3)
      expect(plain?.headers.authorization).toBeUndefined()
      expect(plain?.headers["x-tenant"]).toBeUndefined()
    }))

  it.scoped("health: counts by outcome over 24 hours, failing_since and last_success_at move as deliveries fail and succeed", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      let healthy = false
      const receiver = yield* makeReceiver(() => (healthy ? { status: 200 } : { status: 500 }))
      const hook = yield* createWebhook(tenant, { url: receiver.url })
      expect(hook.body).toMatchObject({
        failing_since: null,
        last_success_at: null,
        deliveries_24h: { succeeded: 0, failed: 0, dead: 0 }
      })

      yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      // Two attempts (one retry in the schedule): the delivery is dead, the webhook failing.
      yield* until("the delivery died", deliveriesOf(tenant, hook.id), (d) => d[0]?.status === "dead")
      const failing = yield* until(
        "the failure counted",
        read(tenant, hook.id),
        (w) => isDeepStrictEqual(w.deliveries_24h, { succeeded: 0, failed: 1, dead: 1 })
      )
      expect(failing).toMatchObject({
        failing_since: expect.any(String),
        last_success_at: null,
        queued: { pending: 0, failed: 0, held: 0 }
      })
      expect((yield* deliveriesOf(tenant, hook.id))[0]?.attempt_log).toHaveLength(2)

      healthy = true
      yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      const recovered = yield* until("the success counted", read(tenant, hook.id), (w) => w.last_success_at !== null)
      expect(recovered).toMatchObject({ failing_since: null, deliveries_24h: { succeeded: 1, failed: 1, dead: 1 } })
      const [succeeded] = yield* deliveriesOf(tenant, hook.id)
      const [first] = succeeded?.attempt_log ?? []
      expect(recovered.last_success_at).toBe(
        new Date(Date.parse(String(first?.started_at)) + Number(first?.latency_ms)).toISOString()
      )

      // A retry scheduled an hour away is queued.
      const later = yield* makeReceiver(() => ({ status: 503, headers: { "retry-after": "3600" } }))
      const waiting = yield* createWebhook(tenant, { url: later.url })
      yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      const queued = yield* until(
        "the retry queued",
        read(tenant, waiting.id),
        (w) => isDeepStrictEqual(w.queued, { pending: 0, failed: 1, held: 0 })
      )
      expect(queued).toMatchObject({
        deliveries_24h: { succeeded: 0, failed: 1, dead: 0 },
        failing_since: expect.any(String)
      })
    }))

  it.scoped("recover after a receiver comes back delivers every dead delivery once more, with its original webhook-id; a repeat queues nothing", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      let up = false
      const receiver = yield* makeReceiver(() => (up ? { status: 200 } : { status: 500 }))
      const hook = yield* createWebhook(tenant, { url: receiver.url })
      const since = new Date(Date.now() - 1000).toISOString()
      for (let i = 0; i < 3; i++) {
        yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      }
      const dead = yield* until(
        "three dead deliveries",
        deliveriesOf(tenant, hook.id, { status: "dead" }),
        (d) => d.length === 3
      )
      expect(receiver.requests.length).toBe(6)

      up = true
      const byOrg = yield* typedClient(tenant.orgToken)
      const recover = (payload: { readonly since: string; readonly until?: string }) =>
        byOrg.webhooks.recover({ path: { id: hook.id }, payload })
      const recovered = yield* recover({ since })
      expect(recovered).toMatchObject({ requeued: 3, more: false, since })
      // Queued again, due from its creation; a repeat finds nothing left to queue.
      expect(yield* recover({ since })).toMatchObject({ requeued: 0, more: false })
      yield* receiver.waitFor("three more", (r) => r.length === 9)
      const again = receiver.requests.slice(6).map((r) => r.headers["webhook-id"]).sort()
      expect(again).toEqual(dead.map((d) => String(d.message_id)).sort())
      const settled = yield* until(
        "all succeeded",
        deliveriesOf(tenant, hook.id),
        (d) => d.length === 3 && d.every((x) => x.status === "succeeded")
      )
      expect(settled.map((d) => d.attempts)).toEqual([3, 3, 3])
      expect(yield* recover({ since })).toMatchObject({ requeued: 0 })
      expect(receiver.requests.length).toBe(9)

      // A window before the deliveries holds none; bad windows and inactive webhooks are refused.
      expect(yield* recover({ since: "2020-01-01", until: "2020-01-02" })).toMatchObject({
        requeued: 0,
        until: "2020-01-02T00:00:00.000Z"
      })
      const backwards = yield* refusedWith(recover({ since, until: "2020-01-01" }), "BadRequest")
      expect(errorBody(backwards)).toMatchObject({
        statusCode: 400,
        details: [{ field: "until", message: "must be after since" }]
      })
      // Raw: a body without `since`, which the typed client cannot send.
      const missing = yield* hub.request("POST", `/api/webhooks/${hook.id}/recover`, {
        token: tenant.orgToken,
        json: {}
      })
      expect(missing.status).toBe(400)
      expect(missing.body).toMatchObject({ statusCode: 400, details: [{ field: "since", message: "is missing" }] })
      yield* byOrg.webhooks.update({ path: { id: hook.id }, payload: { active: false } })
      const inactive = yield* refusedWith(recover({ since }), "Conflict")
      expect(errorBody(inactive)).toMatchObject({ statusCode: 409, error: "webhook_inactive" })
    }))

  it.scoped("recover is bounded: at most `max` a call, saying whether more remain", () =>
    Effect.gen(function*() {
      const deliveries = yield* Effect.provide(WebhookDeliveries, WebhookDeliveries.Default)
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver(() => ({ status: 500 }))
      const hook = yield* createWebhook(tenant, { url: receiver.url })
      for (let i = 0; i < 3; i++) {
        yield* post(envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", nowSeconds()))]]))
      }
      yield* until("three dead deliveries", deliveriesOf(tenant, hook.id, { status: "dead" }), (d) => d.length === 3)
      yield* receiver.waitFor("six attempts", (r) => r.length === 6)
      const window = { since: "2020-01-01T00:00:00.000Z", until: new Date(Date.now() + 60_000).toISOString() }
      // Taken in a fresh hub-less moment: the dispatcher may attempt them again, which only makes them dead once more.
      expect(yield* deliveries.recover(hook.id, window, new Date().toISOString(), 2)).toEqual({
        requeued: 2,
        more: true
      })
      // The third is still dead; a re-send queues it due from its creation, as recover does (read before the dispatcher wakes).
      const [left] = yield* deliveriesOf(tenant, hook.id, { status: "dead" })
      const resent = yield* (yield* typedClient(tenant.instanceToken)).webhooks.retry({
        path: { id: hook.id, deliveryId: left?.id ?? "" }
      })
      expect(resent).toMatchObject({ status: "pending", next_attempt_at: left?.created_at, attempts: 2 })
    }))

  it.scoped("a test event goes through the delivery path, signed, and is answered with its attempt; bounded and idempotent", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver()
      const hook = yield* createWebhook(tenant, { url: receiver.url, events: ["calls"] })
      const client = yield* typedClient(tenant.instanceToken)
      const test = (headers: { readonly "idempotency-key"?: string } = {}) =>
        client.webhooks.test({ path: { id: hook.id }, headers })

      const first = yield* test({ "idempotency-key": "k-1" })
      expect(first).toMatchObject({ webhook_id: hook.id, status: "succeeded", attempts: 1, last_status_code: 200 })
      expect(first.attempt_log.map((a) => a.status_code)).toEqual([200])
      const [request] = receiver.requests
      expect(request?.headers["webhook-id"]).toBe(first.message_id)
      const body = verify(hook.secret, request)
      expect(body).toEqual({
        object: "hub.test",
        entry: [{
          id: tenant.instanceId,
          time: expect.any(Number),
          changes: [{
            field: "hub.test",
            value: {
              webhook_id: hook.id,
              instance_id: tenant.instanceId,
              event_id: first.event_id,
              message: expect.stringContaining("test event"),
              sent_at: expect.any(String)
            }
          }]
        }]
      })

      // Another test within the second is refused; the same key answers the same delivery, sending nothing.
      // Raw: the 429's Retry-After header, which the typed error does not carry.
      const soon = yield* hub.request("POST", `/api/webhooks/${hook.id}/test`, { token: tenant.instanceToken })
      expect(soon.status).toBe(429)
      expect(soon.headers.get("retry-after")).toBe("1")
      expect(soon.body).toMatchObject({ statusCode: 429, error: "rate_limited" })
      const repeated = yield* test({ "idempotency-key": "k-1" })
      expect(repeated).toMatchObject({ id: first.id, status: "succeeded" })
      expect(receiver.requests.length).toBe(1)
      // It is in the delivery log like any other.
      expect((yield* deliveriesOf(tenant, hook.id)).map((d) => d.id)).toEqual([first.id])

      yield* updateTyped(tenant.orgToken, hook.id, { active: false })
      const inactive = yield* refusedWith(test({ "idempotency-key": "k-2" }), "Conflict")
      expect(errorBody(inactive)).toMatchObject({ statusCode: 409, error: "webhook_inactive" })
    }))

  it.scoped("a test to a failing receiver answers the failed attempt and its scheduled retry", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver(() => ({ status: 503, body: "down", headers: { "retry-after": "3600" } }))
      const hook = yield* createWebhook(tenant, { url: receiver.url })
      const answer = yield* (yield* typedClient(tenant.orgToken)).webhooks.test({ path: { id: hook.id }, headers: {} })
      expect(answer).toMatchObject({
        status: "failed",
        attempts: 1,
        last_status_code: 503,
        last_error: "the receiver answered 503"
      })
      expect(answer.attempt_log).toMatchObject([{ status_code: 503, response_snippet: "down" }])
      expect(Date.parse(String(answer.next_attempt_at))).toBeGreaterThan(Date.now() + 3000_000)
    }))

  it.scoped("the sandbox simulates upstream changes of any kind for the instance, so filters can be tried without Meta", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const receiver = yield* makeReceiver()
      yield* createWebhook(tenant, { url: receiver.url, events: ["message_template_status_update"] })
      const answer = yield* (yield* typedClient(tenant.instanceToken)).sandbox.changes({
        payload: {
          changes: [
            {
              field: "message_template_status_update",
              value: { event: "APPROVED", message_template_id: 1234, message_template_name: "order_ready" }
            },
            { field: "account_update", value: { event: "VERIFIED_ACCOUNT" } },
            // A metadata naming another number is replaced: the change is for this instance only.
            {
              field: "message_template_status_update",
              value: { event: "REJECTED", metadata: { phone_number_id: "1" } }
            }
          ]
        }
      })
      expect(answer).toEqual({ accepted: 3, deliveries: 1 })
      const [request] = yield* receiver.waitFor("the template updates", (r) => r.length === 1)
      const metadata = { display_phone_number: tenant.phoneNumberId, phone_number_id: tenant.phoneNumberId }
      expect(JSON.parse(request?.body ?? "")).toEqual({
        object: "whatsapp_business_account",
        entry: [{
          id: tenant.wabaId,
          changes: [
            {
              field: "message_template_status_update",
              value: {
                messaging_product: "whatsapp",
                event: "APPROVED",
                message_template_id: 1234,
                message_template_name: "order_ready",
                metadata
              }
            },
            {
              field: "message_template_status_update",
              value: { messaging_product: "whatsapp", event: "REJECTED", metadata }
            }
          ]
        }]
      })
      // Raw: a field the typed client refuses to encode; the hub's refusal is under test.
      const refused = yield* hub.request("POST", "/sandbox/changes", {
        token: tenant.instanceToken,
        json: { changes: [{ field: "made_up" }] }
      })
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({ statusCode: 400, details: [{ field: "changes.0.field" }] })
    }))

  // Raw: GET /openapi.json is no operation of the contract the typed client is made of.
  it.effect("the OpenAPI document describes the new endpoints and fields", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const document = (yield* hub.request("GET", "/openapi.json")).text
      for (
        const path of ["/api/deliveries", "/api/webhooks/{id}/recover", "/api/webhooks/{id}/test", "/sandbox/changes"]
      ) {
        expect(document).toContain(`"${path}"`)
      }
      for (
        const field of [
          "last_success_at",
          "failing_since",
          "deliveries_24h",
          "gone_410",
          "total_capped",
          "hub.test",
          "webhook_limit_reached"
        ]
      ) {
        expect(document).toContain(field)
      }
    }))
})

layer(testHub({ upstream: "graph", secretKey: Option.some(Redacted.make(new Uint8Array(32).fill(3))) }), {
  excludeTestServices: true
})(
  "outside the sandbox",
  (it) => {
    it.effect("simulated changes exist only in sandbox mode", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const client = yield* typedClient(tenant.instanceToken)
        const answer = yield* refusedWith(
          client.sandbox.changes({ payload: { changes: [{ field: "account_update", value: {} }] } }),
          "NotFound"
        )
        expect(errorBody(answer)).toMatchObject({
          statusCode: 404,
          error: "route_not_found",
          message: "POST /sandbox/changes exists only in sandbox mode (HUB_UPSTREAM=sandbox)"
        })
      }))
  }
)

describe("event kinds", () => {
  plain("a messages change is split by what it carries; other changes are their field, known or not", () => {
    expect(kindsOf("messages", { messages: [] })).toEqual(["messages"])
    expect(kindsOf("messages", { statuses: [] })).toEqual(["statuses"])
    expect(kindsOf("messages", { messages: [], statuses: [] })).toEqual(["messages", "statuses"])
    expect(kindsOf("messages", { errors: [] })).toEqual(["errors"])
    expect(kindsOf("messages", { statuses: [{ errors: [] }], errors: [] })).toEqual(["statuses"])
    expect(kindsOf("messages", { contacts: [] })).toEqual(["messages"])
    expect(kindsOf("calls", { statuses: [] })).toEqual(["calls"])
    expect(kindsOf("message_template_status_update", {})).toEqual(["message_template_status_update"])
    expect(kindsOf("some_future_field", {})).toEqual(["some_future_field"])
    expect(kindsOf("Not A Field", {})).toEqual([])
    expect(kindsOf(undefined, {})).toEqual([])
  })

  plain("a filter takes all, none or some of an event's changes", () => {
    const kinds = [["messages"], ["statuses"], ["messages", "statuses"], ["account_update"]]
    expect(selectChanges(new Set(["statuses"]), kinds)).toEqual([1, 2])
    expect(selectChanges(new Set(["calls"]), kinds)).toBe("none")
    expect(selectChanges(new Set(["messages", "statuses", "account_update"]), kinds)).toBe("all")
  })
})

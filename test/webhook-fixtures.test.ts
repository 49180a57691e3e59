/**
 * Real webhook payloads written by others (the fixtures folder: pywa and whatsapp-api-js, see
 * SOURCES.md) and Meta's own 16 webhook examples, each addressed to a test tenant (only `entry[].id`
 * and `value.metadata.phone_number_id` rewritten) and posted, signed, to POST /upstream/events beside
 * another tenant's change: the tenant's webhook receives the very envelope posted, every field and
 * key order kept, less the other tenant's change; and the records follow (statuses move the message
 * records, inbound messages become inbound records, echoes and the synchronised history become records
 * marked with their origin, once, call events record calls).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { listMessages, sendMessage } from "./support/Messages.js"
import { addressedTo, type Fixture, isObject, type JsonObject, webhookFixtures } from "./support/MetaReference.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { itemsOf, seedTenant, type Tenant, TestHub } from "./support/TestHub.js"
import { signBody, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const APP_SECRET = "app-secret-for-fixtures"

const fixtures = webhookFixtures()

type Json = JsonObject[string]

const list = (
  value: Json | undefined
): ReadonlyArray<JsonObject> => (Array.isArray(value) ? value.filter(isObject) : [])

/** Every change of a payload, in order. */
const changesOf = (payload: Json): ReadonlyArray<JsonObject> =>
  isObject(payload) ? list(payload.entry).flatMap((entry) => list(entry.changes)) : []

/**
 * The values of message changes (a change without field is a message change, as the hub reads it),
 * with where they came from: a `standby` change carries one one level down.
 */
const messageValues = (
  payload: JsonObject
): ReadonlyArray<{ readonly value: JsonObject; readonly origin: string | undefined }> =>
  changesOf(payload).flatMap(
    (c): ReadonlyArray<{ readonly value: JsonObject; readonly origin: string | undefined }> => {
      if (!isObject(c.value)) return []
      if (c.field === undefined || c.field === "messages") return [{ value: c.value, origin: undefined }]
      return c.field === "standby" && isObject(c.value.standby) ? [{ value: c.value.standby, origin: "standby" }] : []
    }
  )

const messageStatuses = (payload: JsonObject) => messageValues(payload).flatMap(({ value }) => list(value.statuses))

const inboundMessages = (payload: JsonObject) => messageValues(payload).flatMap(({ value }) => list(value.messages))

/** What the business sent elsewhere, as the records should show it: [waMessageId, to, type, origin]. */
const echoes = (payload: JsonObject): ReadonlyArray<readonly [string, Json | undefined, string, string]> =>
  [
    ...messageValues(payload).flatMap((
      { value, origin }
    ) => (origin === undefined ? [] : list(value.message_echoes).map((e) => [e, origin] as const))),
    ...changesOf(payload).flatMap((c) =>
      (c.field === "smb_message_echoes" || c.field === "message_echoes") && isObject(c.value)
        ? list(c.value.message_echoes).map((e) => [e, String(c.field)] as const)
        : []
    )
  ].flatMap(([echo, origin]) => {
    const sent = isObject(echo.message) ? { ...echo.message, ...echo } : echo
    return typeof sent.id === "string"
      ? [[sent.id, sent.to ?? sent.to_user_id, typeof sent.type === "string" ? sent.type : "unknown", origin] as const]
      : []
  })

/** The history's messages, as the records should show them: [waMessageId, direction, the user, type]. */
const historyMessages = (payload: JsonObject): ReadonlyArray<readonly [string, string, Json | undefined, string]> =>
  changesOf(payload).filter((c) => c.field === "history" && isObject(c.value)).flatMap((c) => {
    const value = isObject(c.value) ? c.value : {}
    const business = isObject(value.metadata) ? value.metadata.display_phone_number : undefined
    return list(value.history).flatMap((chunk) => list(chunk.threads)).flatMap((thread) =>
      list(thread.messages).flatMap((m) => {
        const outbound = m.from === business
        return typeof m.id === "string"
          ? [
            [
              m.id,
              outbound ? "outbound" : "inbound",
              outbound ? m.to ?? thread.id : m.from,
              typeof m.type === "string" ? m.type : "unknown"
            ] as const
          ]
          : []
      })
    )
  })

const callIds = (payload: JsonObject) =>
  changesOf(payload).filter((c) => c.field === "calls").flatMap((c) =>
    isObject(c.value)
      ? [...list(c.value.calls), ...list(c.value.statuses)].flatMap((
        item
      ) => (typeof item.id === "string" ? [item.id] : []))
      : []
  )

/** The record status a status event gives a just-sent message. */
const RECORD_STATUS: Readonly<Record<string, string>> = {
  sent: "sent",
  delivered: "delivered",
  read: "read",
  played: "read",
  failed: "failed"
}

/** The payload with `extra` first among its first entry's changes, keys in their order. */
const withChangeFirst = (payload: JsonObject, extra: JsonObject): JsonObject =>
  Object.fromEntries(
    Object.entries(payload).map(([key, value]) => [
      key,
      key === "entry" && Array.isArray(value)
        ? value.map((entry, i) =>
          i === 0 && isObject(entry)
            ? Object.fromEntries(
              Object.entries(entry).map(([k, v]) => [k, k === "changes" && Array.isArray(v) ? [extra, ...v] : v])
            )
            : entry
        )
        : value
    ])
  )

const webhookTo = (tenant: Tenant, url: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const created = yield* hub.request("POST", "/api/webhooks", {
      token: tenant.instanceToken,
      json: { url, name: "fixtures" }
    })
    expect(created.status).toBe(201)
  })

/** A send whose upstream message id is `id`, so a status event for `id` has a record to move. */
const sentAs = (tenant: Tenant, id: string, group: boolean) =>
  Effect.gen(function*() {
    const fake = yield* FakeGraph
    yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
      body: {
        messaging_product: "whatsapp",
        contacts: [{ input: "16505551234", wa_id: "16505551234" }],
        messages: [{ id }]
      }
    })
    const sent = yield* sendMessage(tenant.instanceToken, {
      ...(group ? { recipient_type: "group", to: "120363394320896415@g.us" } : { to: "16505551234" }),
      type: "text",
      text: { body: "a message the fixture's status is about" }
    })
    expect(sent.status).toBe(200)
  })

const post = (body: string) =>
  Effect.flatMap(TestHub, (hub) =>
    hub.request("POST", "/upstream/events", {
      body,
      headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
    }))

const deliveredChanges = (request: ReceivedRequest | undefined) => changesOf(JSON.parse(request?.body ?? "null"))

const recordOf = (tenant: Tenant, waMessageId: string) =>
  Effect.map(
    listMessages(tenant.instanceToken, `waMessageId=${encodeURIComponent(waMessageId)}`),
    (listed) => itemsOf(listed.body)
  )

const checkFixture = (fixture: Fixture) =>
  Effect.gen(function*() {
    const tenant = yield* seedTenant()
    const other = yield* seedTenant()
    const mine = yield* makeReceiver()
    const theirs = yield* makeReceiver()
    yield* webhookTo(tenant, mine.url)
    yield* webhookTo(other, theirs.url)

    const payload = addressedTo(fixture.payload, tenant)
    const statuses = messageStatuses(payload)
    for (const s of statuses) if (typeof s.id === "string") yield* sentAs(tenant, s.id, s.recipient_type === "group")
    const before = Number((yield* listMessages(tenant.instanceToken)).body.total)

    const otherChange = statusChange(other, status(wamid(), "delivered", 1750263780))
    const posted = yield* post(JSON.stringify(withChangeFirst(payload, otherChange)))
    const changes = changesOf(payload).length
    expect(posted.status).toBe(200)
    expect(posted.body).toEqual({
      changes: changes + 1,
      accepted: changes + 1,
      duplicates: 0,
      unrouted: 0,
      deliveries: 2,
      stale: 0
    })

    // The tenant gets the upstream's envelope as posted, byte for byte once parsed and written
    // again, less the other tenant's change; the other tenant gets only its own.
    const [delivered] = yield* mine.waitFor("the tenant's delivery", (r) => r.length === 1)
    expect(delivered?.body).toBe(JSON.stringify(payload))
    const [theirsDelivered] = yield* theirs.waitFor("the other tenant's delivery", (r) => r.length === 1)
    expect(deliveredChanges(theirsDelivered)).toEqual([otherChange])

    // Records: statuses moved the messages they name, inbound messages were recorded, calls too.
    for (const s of statuses) {
      const records = yield* recordOf(tenant, String(s.id))
      expect(records.map((r) => [r.direction, r.status])).toEqual([[
        "outbound",
        RECORD_STATUS[String(s.status)] ?? "pending"
      ]])
    }
    // A username user's message has no `from`, only `from_user_id` (a BSUID): it is recorded all the same.
    const inbound = inboundMessages(payload).filter((m) =>
      typeof m.id === "string" && (typeof m.from === "string" || typeof m.from_user_id === "string")
    )
    for (const m of inbound) {
      const records = yield* recordOf(tenant, String(m.id))
      expect(records.map((r) => [r.direction, r.type, r.to])).toEqual([[
        "inbound",
        typeof m.type === "string" ? m.type : "unknown",
        m.from ?? m.from_user_id
      ]])
      if (typeof m.from_user_id === "string") expect(records[0]).toMatchObject({ userId: m.from_user_id })
    }
    // Echoes of what the business sent elsewhere and the synchronised history are records too, marked with their origin.
    for (const [id, to, type, origin] of echoes(payload)) {
      expect((yield* recordOf(tenant, id)).map((r) => [r.direction, r.to, r.type, r.origin])).toEqual([[
        "outbound",
        to,
        type,
        origin
      ]])
    }
    for (const [id, direction, user, type] of historyMessages(payload)) {
      expect((yield* recordOf(tenant, id)).map((r) => [r.direction, r.to, r.type, r.origin])).toEqual([[
        direction,
        user,
        type,
        "history"
      ]])
    }
    const recorded = new Set([
      ...inbound.map((m) => m.id),
      ...echoes(payload).map(([id]) => id),
      ...historyMessages(payload).map(([id]) => id)
    ])
    expect(Number((yield* listMessages(tenant.instanceToken)).body.total)).toBe(before + recorded.size)
    // Posted again (the upstream's retry), nothing is recorded twice.
    if (recorded.size > 0) {
      yield* post(JSON.stringify(payload))
      expect(Number((yield* listMessages(tenant.instanceToken)).body.total)).toBe(before + recorded.size)
    }
    const sql = yield* SqlClient.SqlClient
    const calls = yield* sql<
      { readonly call_id: string }
    >`SELECT call_id FROM calls WHERE instance_id = ${tenant.instanceId} ORDER BY call_id`
    expect(calls.map((c) => c.call_id)).toEqual([...new Set(callIds(payload))].sort())
  })

layer(testHubOnFakeGraph({ appSecret: Option.some(Redacted.make(APP_SECRET)), webhookAllowPrivate: true }))(
  "webhook payloads written by others",
  (it) => {
    it("the fixtures folder and Meta's 16 webhook examples are all here", () => {
      expect(fixtures.filter((f) => f.name.startsWith("meta/"))).toHaveLength(16)
      expect(fixtures.filter((f) => !f.name.startsWith("meta/")).length).toBeGreaterThanOrEqual(40)
    })

    for (const fixture of fixtures) {
      it.scoped(`${fixture.name}: delivered unchanged to its tenant only, records updated`, () => checkFixture(fixture))
    }
  }
)

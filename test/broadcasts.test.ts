/**
 * Broadcasts (issue 32) through the real HTTP server on both engines, against a recording fake Graph, as a
 * program calls them (the typed client): each recipient once, as a bulk queued send of the template with
 * their own components; the opted out skipped; counts by status and failure reason; recipients listed and
 * added; a broadcast cancelled. Bodies the typed client refuses to send are sent raw.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Schema, Stream } from "effect"
import type { BroadcastRecord } from "../src/Broadcasts/Api.js"
import type { HubClient } from "../src/Client.js"
import { SendQueueDrainer } from "../src/SendQueue/Drainer.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { makeReceiver } from "./support/Receivers.js"
import { refusedWith } from "./support/Refusal.js"
import { untilSignalledThat } from "./support/Signals.js"
import { seedTenant, TestHub } from "./support/TestHub.js"
import { createTyped, postUpstream } from "./support/TypedWebhooks.js"
import { envelope } from "./support/UpstreamPayloads.js"

const template = {
  name: "spring_sale",
  language: { code: "en_US" },
  components: [{ type: "body" as const, parameters: [{ type: "text" as const, text: "friend" }] }]
}
const BSUID = "US.13491208655302741918"

const settled = Stream.unwrap(Effect.map(SendQueueDrainer, (drainer) => drainer.settled))

type Broadcast = typeof BroadcastRecord.Type

/** The broadcast as the typed client reads it, read again after each settled send until `condition` holds. */
const broadcastOnceSettled = (
  client: HubClient,
  broadcastId: string,
  what: string,
  condition: (broadcast: Broadcast) => boolean
) => untilSignalledThat(settled, what, client.broadcasts.get({ path: { broadcastId } }), condition)

const decodeSendBody = Schema.decodeUnknownSync(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const templateSends = (phoneNumberId: string) =>
  Effect.map(
    Effect.flatMap(FakeGraph, (fake) => fake.requests),
    (requests) => requests.filter((r) => r.method === "POST" && r.path.endsWith(`/${phoneNumberId}/messages`))
  )

describe.each(["sqlite", "postgres"] as const)("broadcasts (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine, graphTimeout: Duration.seconds(1), webhookAllowPrivate: true }), {
    excludeTestServices: true
  })("", (it) => {
    it.effect("each person once, with their own components; the opted out skipped; counts and recipients readable", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const byOrg = yield* hub.client(tenant.orgToken)
        const client = yield* hub.client(tenant.instanceToken)
        // One person stopped the business's marketing messages.
        yield* postUpstream(envelope([tenant.wabaId, [{
          field: "user_preferences",
          value: {
            messaging_product: "whatsapp",
            metadata: { display_phone_number: "15550001234", phone_number_id: tenant.phoneNumberId },
            user_preferences: [{ wa_id: "16505550003", category: "marketing_messages", value: "stop", timestamp: 1 }]
          }
        }]]))
        const ana = [{ type: "body" as const, parameters: [{ type: "text" as const, text: "Ana" }] }]
        const created = yield* byOrg.broadcasts.create({
          payload: {
            name: "Spring sale",
            phone_number_id: tenant.phoneNumberId,
            template,
            recipients: [
              { to: "+16505550001" },
              { to: "16505550001" },
              { to: "16505550002", components: ana },
              { recipient: BSUID },
              { to: "16505550003" }
            ]
          }
        })
        expect(created).toMatchObject({
          id: expect.stringMatching(/^bc_/),
          name: "Spring sale",
          instance_id: tenant.instanceId,
          template,
          counts: { recipients: 4, skipped: 1 },
          failures: { opted_out: 1 }
        })
        const broadcastId = created.id
        const done = yield* broadcastOnceSettled(
          client,
          broadcastId,
          "every send made",
          (b) => b.status === "completed"
        )
        expect(done.counts).toMatchObject({ recipients: 4, pending: 3, skipped: 1, failed: 0 })

        const sends = yield* templateSends(tenant.phoneNumberId)
        const byRecipient = Object.fromEntries(sends.map((s) => {
          const json = decodeSendBody(s.json)
          return [String(json.to ?? json.recipient), json]
        }))
        expect(Object.keys(byRecipient).sort()).toEqual(["16505550001", "16505550002", BSUID].sort())
        expect(sends).toHaveLength(3)
        expect(byRecipient["16505550002"]).toEqual({
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: "16505550002",
          type: "template",
          template: { ...template, components: ana }
        })
        expect(byRecipient["16505550001"]).toMatchObject({ template })

        const skipped = yield* client.broadcasts.recipients({
          path: { broadcastId },
          urlParams: { status: "skipped", limit: 100 }
        })
        expect(skipped).toEqual({
          data: [{ to: "16505550003", message_id: null, status: "skipped", failure_reason: "opted_out" }],
          next: null
        })
        const firstPage = yield* client.broadcasts.recipients({ path: { broadcastId }, urlParams: { limit: 2 } })
        expect(firstPage.data).toHaveLength(2)
        expect(firstPage.next).not.toBeNull()
        const rest = yield* client.broadcasts.recipients({
          path: { broadcastId },
          urlParams: { limit: 2, ...(firstPage.next === null ? {} : { after: firstPage.next }) }
        })
        expect(rest).toMatchObject({ data: [{}, {}], next: null })

        // More recipients: one new, one already in it.
        const added = yield* client.broadcasts.addRecipients({
          path: { broadcastId },
          payload: { recipients: [{ to: "16505550004" }, { to: "16505550002" }] }
        })
        expect(added).toEqual({ added: 1, skipped: 0, duplicates: 1, recipients: 5 })
        const again = yield* broadcastOnceSettled(
          client,
          broadcastId,
          "the added send made",
          (b) => b.status === "completed"
        )
        expect(again.counts).toMatchObject({ recipients: 5, pending: 4, skipped: 1 })
        expect(yield* templateSends(tenant.phoneNumberId)).toHaveLength(4)
        expect(yield* byOrg.broadcasts.list({ urlParams: { limit: 20 } })).toMatchObject({
          data: [{ id: broadcastId, counts: { recipients: 5 } }],
          next: null
        })
      }))

    it.scoped("a scheduled broadcast cancelled: its sends end failed as cancelled and told so, none is made, it takes no more recipients", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const client = yield* hub.client(tenant.instanceToken)
        const outcomes = yield* makeReceiver()
        yield* createTyped(tenant.instanceToken, { name: "outcomes", url: outcomes.url, events: ["hub.message_queue"] })
        const created = yield* client.broadcasts.create({
          payload: {
            name: "Later",
            template,
            send_at: new Date(Date.now() + 3_600_000).toISOString(),
            recipients: [{ to: "16505550011" }, { to: "16505550012" }]
          }
        })
        expect(created).toMatchObject({ status: "scheduled", counts: { recipients: 2, pending: 2 } })
        const broadcastId = created.id
        const cancelled = yield* client.broadcasts.cancel({ path: { broadcastId } })
        expect(cancelled).toMatchObject({
          status: "cancelled",
          cancelled_at: expect.any(String),
          counts: { recipients: 2, pending: 0, failed: 2 },
          failures: { cancelled: 2 }
        })
        const refused = yield* refusedWith(
          client.broadcasts.addRecipients({ path: { broadcastId }, payload: { recipients: [{ to: "16505550013" }] } }),
          "Conflict"
        )
        expect(refused).toMatchObject({ error: "cancelled" })
        const told = yield* outcomes.waitFor("both cancellations told", (r) => r.length === 2)
        expect(
          told.map((r) => JSON.parse(r.body).entry[0].changes[0].value).map((v) => [v.to, v.failure_reason]).sort()
        )
          .toEqual([["16505550011", "cancelled"], ["16505550012", "cancelled"]])
        const other = yield* hub.client((yield* seedTenant()).orgToken)
        yield* refusedWith(other.broadcasts.get({ path: { broadcastId } }), "NotFound")
        expect(yield* templateSends(tenant.phoneNumberId)).toEqual([])
      }))

    it.effect("Meta's 131050 makes a later broadcast skip the person", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const client = yield* hub.client(tenant.instanceToken)
        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
          status: 400,
          body: { error: { message: "Marketing opted out", type: "OAuthException", code: 131050, fbtrace_id: "B1" } }
        })
        const first = yield* client.broadcasts.create({
          payload: { name: "First", template, recipients: [{ to: "16505550021" }] }
        })
        const refusedOnce = yield* broadcastOnceSettled(
          client,
          first.id,
          "the refusal",
          (b) => b.status === "completed"
        )
        expect(refusedOnce).toMatchObject({ counts: { failed: 1 }, failures: { refused: 1 } })
        const second = yield* client.broadcasts.create({
          payload: { name: "Second", template, recipients: [{ to: "16505550021" }] }
        })
        expect(second).toMatchObject({ status: "completed", counts: { skipped: 1 }, failures: { opted_out: 1 } })
        expect(yield* templateSends(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a template that is not APPROVED, or not the business account's, is refused before anything is queued", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const client = yield* (yield* TestHub).client(tenant.instanceToken)
        const templates = { method: "GET", path: `/${tenant.wabaId}/message_templates` } as const
        const listed = (status: string, name = template.name) => ({
          status: 200,
          body: { data: [{ id: "1234", name, language: "en_US", status, category: "MARKETING" }] }
        })
        yield* fake.respond(templates, listed("PENDING"))
        const pending = yield* refusedWith(
          client.broadcasts.create({ payload: { name: "Early", template, recipients: [{ to: "16505550001" }] } }),
          "BadRequest"
        )
        expect(pending).toMatchObject({ error: "template_not_approved" })
        expect(pending.message).toContain("spring_sale (en_US) is PENDING")
        // Meta's name filter matches parts of names: a longer name is another template.
        yield* fake.respond(templates, listed("APPROVED", "spring_sale_2"))
        const missing = yield* refusedWith(
          client.broadcasts.create({ payload: { name: "Other", template, recipients: [{ to: "16505550001" }] } }),
          "BadRequest"
        )
        expect(missing).toMatchObject({ error: "template_not_found" })
        const lookups = (yield* fake.requests).filter((r) => r.method === "GET" && r.path.endsWith(templates.path))
        expect(lookups[0]?.query).toMatchObject({ name: "spring_sale", language: "en_US" })
        expect(yield* client.broadcasts.list({ urlParams: { limit: 20 } })).toEqual({ data: [], next: null })
        expect(yield* templateSends(tenant.phoneNumberId)).toEqual([])
      }))

    // Raw: bodies the typed client refuses to send.
    it.effect("raw requests: bad input is a 400 naming the field, and nothing is queued", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const tooMany = Array.from({ length: 1001 }, (_, i) => ({ to: `1650555${String(i).padStart(4, "0")}` }))
        for (
          const [json, field] of [
            [{ name: "x", template, recipients: tooMany }, "recipients"],
            [{ name: "x", template, recipients: [{ to: "1650", recipient: BSUID }] }, "recipients"],
            [{ name: "", template, recipients: [{ to: "16505550001" }] }, "name"],
            [{
              name: "x",
              template: { name: "Bad Name", language: { code: "en" } },
              recipients: [{ to: "16505550001" }]
            }, "template"]
          ] as const
        ) {
          const refused = yield* hub.request("POST", "/api/broadcasts", { token: tenant.instanceToken, json })
          expect(refused.status, refused.text).toBe(400)
          expect(JSON.stringify(refused.body)).toContain(field)
        }
        expect(yield* (yield* hub.client(tenant.instanceToken)).broadcasts.list({ urlParams: { limit: 20 } }))
          .toEqual({ data: [], next: null })
        const badCursor = yield* hub.request("GET", "/api/broadcasts?after=nope", { token: tenant.instanceToken })
        expect(badCursor.status).toBe(400)
        expect(JSON.stringify(badCursor.body)).toContain("after")
      }))

    it.effect("the list of broadcasts comes newest first, a page at a time, the next page after the cursor", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const client = yield* (yield* TestHub).client(tenant.instanceToken)
        const ids: Array<string> = []
        for (const name of ["first", "second", "third"]) {
          const created = yield* client.broadcasts.create({
            payload: {
              name,
              template,
              recipients: [{ to: "16505550001" }],
              send_at: new Date(Date.now() + 3_600_000).toISOString()
            }
          })
          ids.push(created.id)
        }
        const firstPage = yield* client.broadcasts.list({ urlParams: { limit: 2 } })
        expect(firstPage.data.map((b) => b.name)).toEqual(["third", "second"])
        expect(firstPage.next).toBe(ids[1])
        const rest = yield* client.broadcasts.list({ urlParams: { limit: 2, after: firstPage.next ?? "" } })
        expect(rest).toMatchObject({ data: [{ name: "first" }], next: null })
      }))
  })
})

/**
 * Broadcasts (issue 32) through the real HTTP server on both engines, against a recording fake Graph:
 * each recipient once, as a bulk queued send of the template with their own components; the opted out
 * skipped; counts by status and failure reason; recipients listed and added; a broadcast cancelled.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Schema, Stream } from "effect"
import { SendQueueDrainer } from "../src/SendQueue/Drainer.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { untilSignalledThat } from "./support/Signals.js"
import { seedTenant, TestHub } from "./support/TestHub.js"
import { postUpstream } from "./support/TypedWebhooks.js"
import { envelope } from "./support/UpstreamPayloads.js"

const template = {
  name: "spring_sale",
  language: { code: "en_US" },
  components: [{ type: "body", parameters: [{ type: "text", text: "friend" }] }]
}
const BSUID = "US.13491208655302741918"

const settled = Stream.unwrap(Effect.map(SendQueueDrainer, (drainer) => drainer.settled))

/** The broadcast as GET answers it, read again after each settled send until `condition` holds. */
const broadcastOnceSettled = (
  token: string,
  id: string,
  what: string,
  condition: (body: Readonly<Record<string, unknown>>) => boolean
) =>
  Effect.flatMap(TestHub, (hub) =>
    untilSignalledThat(
      settled,
      what,
      Effect.map(hub.request("GET", `/api/broadcasts/${id}`, { token }), (answer) => answer.body),
      condition
    ))

const decodeSendBody = Schema.decodeUnknownSync(Schema.Record({ key: Schema.String, value: Schema.Unknown }))

const templateSends = (phoneNumberId: string) =>
  Effect.map(
    Effect.flatMap(FakeGraph, (fake) => fake.requests),
    (requests) => requests.filter((r) => r.method === "POST" && r.path.endsWith(`/${phoneNumberId}/messages`))
  )

const decodeCounts = Schema.decodeUnknownSync(
  Schema.Struct({ counts: Schema.Record({ key: Schema.String, value: Schema.Number }) })
)
const countsOf = (body: Readonly<Record<string, unknown>>) => decodeCounts(body).counts

describe.each(["sqlite", "postgres"] as const)("broadcasts (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine, graphTimeout: Duration.seconds(1) }), { excludeTestServices: true })("", (it) => {
    it.effect("each person once, with their own components; the opted out skipped; counts and recipients readable", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        // One person stopped the business's marketing messages.
        yield* postUpstream(envelope([tenant.wabaId, [{
          field: "user_preferences",
          value: {
            messaging_product: "whatsapp",
            metadata: { display_phone_number: "15550001234", phone_number_id: tenant.phoneNumberId },
            user_preferences: [{ wa_id: "16505550003", category: "marketing_messages", value: "stop", timestamp: 1 }]
          }
        }]]))
        const created = yield* hub.request("POST", "/api/broadcasts", {
          token: tenant.orgToken,
          json: {
            name: "Spring sale",
            phone_number_id: tenant.phoneNumberId,
            template,
            recipients: [
              { to: "+16505550001" },
              { to: "16505550001" },
              {
                to: "16505550002",
                components: [{ type: "body", parameters: [{ type: "text", text: "Ana" }] }]
              },
              { recipient: BSUID },
              { to: "16505550003" }
            ]
          }
        })
        expect(created.status, created.text).toBe(201)
        expect(created.body).toMatchObject({
          id: expect.stringMatching(/^bc_/),
          name: "Spring sale",
          instance_id: tenant.instanceId,
          template,
          counts: { recipients: 4, skipped: 1 },
          failures: { opted_out: 1 }
        })
        const id = String(created.body.id)
        const done = yield* broadcastOnceSettled(
          tenant.instanceToken,
          id,
          "every send made",
          (body) => body.status === "completed"
        )
        expect(done).toMatchObject({ counts: { recipients: 4, pending: 3, skipped: 1, failed: 0 } })

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
          template: { ...template, components: [{ type: "body", parameters: [{ type: "text", text: "Ana" }] }] }
        })
        expect(byRecipient["16505550001"]).toMatchObject({ template })

        const skipped = yield* hub.request("GET", `/api/broadcasts/${id}/recipients?status=skipped`, {
          token: tenant.instanceToken
        })
        expect(skipped.body).toEqual({
          data: [{ to: "16505550003", message_id: null, status: "skipped", failure_reason: "opted_out" }],
          next: null
        })
        const firstPage = yield* hub.request("GET", `/api/broadcasts/${id}/recipients?limit=2`, {
          token: tenant.instanceToken
        })
        expect((firstPage.body.data as ReadonlyArray<unknown>).length).toBe(2)
        const rest = yield* hub.request(
          "GET",
          `/api/broadcasts/${id}/recipients?limit=2&after=${firstPage.body.next}`,
          {
            token: tenant.instanceToken
          }
        )
        expect(rest.body).toMatchObject({ data: [{}, {}], next: null })

        // More recipients: one new, one already in it.
        const added = yield* hub.request("POST", `/api/broadcasts/${id}/recipients`, {
          token: tenant.instanceToken,
          json: { recipients: [{ to: "16505550004" }, { to: "16505550002" }] }
        })
        expect(added.body).toEqual({ added: 1, skipped: 0, duplicates: 1, recipients: 5 })
        yield* broadcastOnceSettled(
          tenant.instanceToken,
          id,
          "the added send made",
          (body) => body.status === "completed"
        )
        expect(countsOf(
          yield* hub.request("GET", `/api/broadcasts/${id}`, { token: tenant.instanceToken }).pipe(
            Effect.map((answer) => answer.body)
          )
        )).toMatchObject({ recipients: 5, pending: 4, skipped: 1 })
        expect(yield* templateSends(tenant.phoneNumberId)).toHaveLength(4)
        const listed = yield* hub.request("GET", "/api/broadcasts", { token: tenant.orgToken })
        expect(listed.body).toMatchObject({ data: [{ id, counts: { recipients: 5 } }] })
      }))

    it.effect("a scheduled broadcast cancelled: its sends end failed as cancelled, none is made, it takes no more recipients", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const created = yield* hub.request("POST", "/api/broadcasts", {
          token: tenant.instanceToken,
          json: {
            name: "Later",
            template,
            send_at: new Date(Date.now() + 3_600_000).toISOString(),
            recipients: [{ to: "16505550011" }, { to: "16505550012" }]
          }
        })
        expect(created.status, created.text).toBe(201)
        expect(created.body).toMatchObject({ status: "scheduled", counts: { recipients: 2, pending: 2 } })
        const id = String(created.body.id)
        const cancelled = yield* hub.request("POST", `/api/broadcasts/${id}/cancel`, { token: tenant.instanceToken })
        expect(cancelled.body).toMatchObject({
          status: "cancelled",
          cancelled_at: expect.any(String),
          counts: { recipients: 2, pending: 0, failed: 2 },
          failures: { cancelled: 2 }
        })
        const refused = yield* hub.request("POST", `/api/broadcasts/${id}/recipients`, {
          token: tenant.instanceToken,
          json: { recipients: [{ to: "16505550013" }] }
        })
        expect(refused.status).toBe(409)
        expect(refused.body).toMatchObject({ statusCode: 409, error: "cancelled" })
        const other = yield* seedTenant()
        expect((yield* hub.request("GET", `/api/broadcasts/${id}`, { token: other.orgToken })).status).toBe(404)
        expect(yield* templateSends(tenant.phoneNumberId)).toEqual([])
      }))

    it.effect("bad input is a 400 naming the field, and nothing is queued; Meta's 131050 makes a later broadcast skip the person", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
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
        expect((yield* hub.request("GET", "/api/broadcasts", { token: tenant.instanceToken })).body).toEqual({
          data: []
        })

        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
          status: 400,
          body: { error: { message: "Marketing opted out", type: "OAuthException", code: 131050, fbtrace_id: "B1" } }
        })
        const first = yield* hub.request("POST", "/api/broadcasts", {
          token: tenant.instanceToken,
          json: { name: "First", template, recipients: [{ to: "16505550021" }] }
        })
        const firstId = String(first.body.id)
        const refusedOnce = yield* broadcastOnceSettled(
          tenant.instanceToken,
          firstId,
          "the refusal",
          (body) => body.status === "completed"
        )
        expect(refusedOnce).toMatchObject({ counts: { failed: 1 }, failures: { refused: 1 } })
        const second = yield* hub.request("POST", "/api/broadcasts", {
          token: tenant.instanceToken,
          json: { name: "Second", template, recipients: [{ to: "16505550021" }] }
        })
        expect(second.body).toMatchObject({ status: "completed", counts: { skipped: 1 }, failures: { opted_out: 1 } })
        expect(yield* templateSends(tenant.phoneNumberId)).toHaveLength(1)
      }))
  })
})

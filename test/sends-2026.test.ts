/**
 * Meta's 2026 sends through the real HTTP server: a username user is addressed by their business-scoped
 * user id (`recipient`), exactly one of `to` and `recipient` is given, the answer's contacts[] pass
 * through, and every field of a send the hub does not model (Direct Send's `category`, `ttl`, …) reaches
 * the Graph unchanged; the record keeps the category and the BSUID. Others' 2026 request fixtures are sent as they are.
 * The other endpoints that forward a body (templates, settings, a call's pre-accept) keep what they do not model too.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { filledPlaceholders, graphExchangeFixtures, isObject } from "./support/MetaReference.js"
import { seedTenant, TestHub } from "./support/TestHub.js"
import { individualMessage, messagesFirstPage } from "./support/TypedRequests.js"

const BSUID = "US.13491208655302741918"
const fixtures = graphExchangeFixtures()
// Meta's placeholders (<WHATSAPP_USER_PHONE_NUMBER>, …) filled as the other fixture tests fill them.
const requests = fixtures.filter((f) => f.name.includes(".request")).map((f) => ({
  ...f,
  payload: filledPlaceholders(f.payload)
}))
const sendAnswer = fixtures.find((f) => f.name.includes("send_response"))

describe.each(["sqlite", "postgres"] as const)("sends, 2026 (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })("", (it) => {
    it.effect("a send to a business-scoped user id goes as `recipient`; the answer's contacts pass through; the record shows the id", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        if (sendAnswer === undefined) return yield* Effect.dieMessage("the send answer fixture")
        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, { body: sendAnswer.payload })
        const client = yield* hub.client(tenant.instanceToken)
        const sent = yield* client.messages.send({
          payload: { ...individualMessage, recipient: BSUID, type: "text", text: { body: "Hi" } },
          headers: {}
        })
        expect(sent).toEqual(sendAnswer.payload)
        const upstream = yield* fake.lastRequest
        expect(upstream.json).toEqual({
          messaging_product: "whatsapp",
          recipient_type: "individual",
          recipient: BSUID,
          type: "text",
          text: { body: "Hi" }
        })
        const [record] =
          (yield* client.messages.list({ urlParams: { ...messagesFirstPage, direction: "outbound" } })).data
        expect(record).toMatchObject({ to: BSUID, userId: BSUID, direction: "outbound" })
      }))

    it.effect("exactly one of to and recipient: both or neither is a 400 naming both, and nothing is sent", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const before = (yield* fake.requests).length
        for (const json of [{ to: "16505551234", recipient: BSUID, text: { body: "x" } }, { text: { body: "x" } }]) {
          const refused = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json })
          expect(refused.status).toBe(400)
          expect(refused.body).toMatchObject({
            error: "validation_failed",
            details: [{
              field: "to",
              message:
                "give exactly one of to (the recipient's number, or a group id) and recipient (their business-scoped user id)"
            }]
          })
        }
        const malformed = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { recipient: "us.123", text: { body: "x" } }
        })
        expect(malformed.status).toBe(400)
        expect(malformed.body).toMatchObject({ details: [{ field: "recipient" }] })
        expect((yield* fake.requests).length).toBe(before)
      }))

    it.effect("fields the hub does not model are forwarded unchanged, modeled ones still checked; the record keeps the category", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const extra = {
          category: "utility",
          ttl: 600,
          direct_send_config: { template_name: "order_update" },
          biz_opaque_callback_data: "order-42",
          recipient_identity_key_hash: "aGFzaA",
          next_thing_meta_adds: { nested: [1, "two"] }
        }
        const sent = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { to: "+16505551234", text: { body: "Shipped" }, ...extra }
        })
        expect(sent.status).toBe(200)
        expect((yield* fake.lastRequest).json).toEqual({
          messaging_product: "whatsapp",
          recipient_type: "individual",
          to: "16505551234",
          type: "text",
          text: { body: "Shipped" },
          ...extra
        })
        // What reaches the Graph is the wire's matter (raw above); the record is read through the typed client.
        const [record] = (yield* (yield* hub.client(tenant.instanceToken)).messages.list({
          urlParams: { ...messagesFirstPage, direction: "outbound" }
        })).data
        expect(record).toMatchObject({ category: "utility", to: "16505551234" })
        // The hub's own field never reaches the Graph; a modeled field is still checked.
        const viaOrg = yield* hub.request("POST", "/api/messages", {
          token: tenant.orgToken,
          json: { phone_number_id: tenant.phoneNumberId, to: "16505551234", text: { body: "x" }, ttl: 60 }
        })
        expect(viaOrg.status).toBe(200)
        expect((yield* fake.lastRequest).json).not.toHaveProperty("phone_number_id")
        const bad = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { to: "16505551234", text: { body: 5 }, category: "utility" }
        })
        expect(bad.status).toBe(400)
      }))

    it.effect.each(requests.map((f) => [f.name, f.payload] as const))(
      "%s reaches the Graph exactly as written",
      ([, payload]) =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          const sent = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json: payload })
          expect(sent.status, sent.text).toBe(200)
          const upstream = yield* fake.lastRequest
          expect(isObject(upstream.json) ? upstream.json : {}).toEqual(payload)
        })
    )

    it.effect("every other endpoint that forwards a body to the Graph forwards what it does not model, and still checks what it does", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const extra = { next_thing_meta_adds: { nested: [1, "two"] } }
        const template = {
          name: "spring_sale",
          language: "en_US",
          category: "MARKETING",
          components: [{ type: "BODY", text: "Sale" }]
        }
        const created = yield* hub.request("POST", "/templates", {
          token: tenant.instanceToken,
          json: { ...template, message_send_ttl_seconds: 43200, parameter_format: "POSITIONAL", ...extra }
        })
        expect(created.status).toBe(200)
        expect((yield* fake.lastRequest).json).toEqual({
          ...template,
          message_send_ttl_seconds: 43200,
          parameter_format: "POSITIONAL",
          ...extra
        })
        const badTemplate = yield* hub.request("POST", "/templates", {
          token: tenant.instanceToken,
          json: { ...template, category: "PROMO", ...extra }
        })
        expect(badTemplate.status).toBe(400)

        const settings = yield* hub.request("POST", "/phone-numbers/settings", {
          token: tenant.instanceToken,
          json: { calling: { status: "enabled", brand_new_option: true } }
        })
        expect(settings.status).toBe(200)
        expect((yield* fake.lastRequest).json).toEqual({ calling: { status: "enabled", brand_new_option: true } })
        // A section Meta adds is one section too, forwarded as given; two sections are still refused.
        const newSection = yield* hub.request("POST", "/phone-numbers/settings", {
          token: tenant.instanceToken,
          json: { messaging_limits: { tier: "x" } }
        })
        expect(newSection.status).toBe(200)
        expect((yield* fake.lastRequest).json).toEqual({ messaging_limits: { tier: "x" } })
        const two = yield* hub.request("POST", "/phone-numbers/settings", {
          token: tenant.instanceToken,
          json: { calling: { status: "enabled" }, messaging_limits: { tier: "x" } }
        })
        expect(two.status).toBe(400)

        const preAccepted = yield* hub.request("POST", "/api/calls/pre-accept", {
          token: tenant.instanceToken,
          json: { to: "16505551234", call_id: "wacid.ABC", biz_opaque_callback_data: "call-9", ...extra }
        })
        expect(preAccepted.status).toBe(200)
        expect((yield* fake.lastRequest).json).toEqual({
          messaging_product: "whatsapp",
          to: "16505551234",
          action: "pre_accept",
          call_id: "wacid.ABC",
          biz_opaque_callback_data: "call-9",
          ...extra
        })
      }))
  })
})

/**
 * The Marketing Messages API through the real HTTP server, on both engines and both upstreams: a
 * MARKETING template send goes to /{phone-number-id}/marketing_messages when the instance has it on
 * (or the request says `via`), its category learned from the hub's own template calls,
 * message_template_status_update and the completed phase of template_category_update (never the
 * impending one); anything else, and an unknown template, goes to /messages; the record says which.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { InstancesRepo } from "../src/Instances/Repo.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { individualMessage, messagesFirstPage, sentNow } from "./support/TypedRequests.js"

const TEMPLATE = { name: "spring_sale", language: "en_US" }

const templateSend = (json: Record<string, unknown> = {}) => ({
  to: "16505551234",
  type: "template",
  template: { name: TEMPLATE.name, language: { code: TEMPLATE.language } },
  ...json
})

/** A WABA-level template change, as the upstream posts it (no phone number: routed by the business account). */
const postTemplateChange = (tenant: Tenant, field: string, value: Record<string, unknown>) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const posted = yield* hub.request("POST", "/upstream/events", {
      json: {
        object: "whatsapp_business_account",
        entry: [{ id: tenant.wabaId, time: 1750000000, changes: [{ field, value }] }]
      }
    })
    expect(posted.status).toBe(200)
  })

const completed = (category: string) => ({
  message_template_id: 278077987957091,
  message_template_name: TEMPLATE.name,
  // Webhooks may write the language with a hyphen; sends write en_US.
  message_template_language: "en-US",
  previous_category: "UTILITY",
  new_category: category
})

const marketingMessages = (tenant: Tenant, mode: "auto" | "off") =>
  Effect.flatMap(InstancesRepo, (repo) => repo.updateInstance(tenant.instanceId, { marketingMessages: mode }))

/** The template send through the typed client: `via` the hub's own, `forwarded` the keys it does not model. */
const typedTemplateSend = (
  options: { readonly via?: "auto" | "messages" | "marketing_messages"; readonly forwarded?: Record<string, string> }
) => ({
  ...individualMessage,
  to: "16505551234",
  type: "template" as const,
  template: { name: TEMPLATE.name, language: { code: TEMPLATE.language } },
  ...options
})

/** Sends (through the typed client) and answers which Graph endpoint received it, and the record's endpoint. */
const sentTo = (tenant: Tenant, options: Parameters<typeof typedTemplateSend>[0] = {}) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const fake = yield* FakeGraph
    const client = yield* hub.client(tenant.instanceToken)
    const sent = yield* sentNow(client.messages.send({ payload: typedTemplateSend(options), headers: {} }))
    const upstream = yield* fake.lastRequest
    expect(upstream.json).toEqual({
      messaging_product: "whatsapp",
      recipient_type: "individual",
      ...templateSend(),
      ...options.forwarded
    })
    const id = sent.messages[0]?.id
    expect(id).toEqual(expect.any(String))
    const [record] = (yield* client.messages.list({ urlParams: { ...messagesFirstPage, waMessageId: id } })).data
    return [upstream.path.split("/").pop(), record?.endpoint]
  })

describe.each(["sqlite", "postgres"] as const)("the Marketing Messages API (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })("", (it) => {
    it.effect("a MARKETING template goes to /marketing_messages once the instance has it on; the record says which endpoint carried it", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        // Unknown template, instance off: /messages.
        expect(yield* sentTo(tenant)).toEqual(["messages", "messages"])
        yield* postTemplateChange(tenant, "template_category_update", completed("MARKETING"))
        expect(yield* sentTo(tenant)).toEqual(["messages", "messages"])
        yield* marketingMessages(tenant, "auto")
        expect(yield* sentTo(tenant, { forwarded: { biz_opaque_callback_data: "campaign-7" } })).toEqual([
          "marketing_messages",
          "marketing_messages"
        ])
        // The request's `via` wins over the instance's setting, and is never sent upstream.
        expect(yield* sentTo(tenant, { via: "messages" })).toEqual(["messages", "messages"])
        yield* marketingMessages(tenant, "off")
        expect(yield* sentTo(tenant, { via: "auto" })).toEqual(["marketing_messages", "marketing_messages"])
        expect(yield* sentTo(tenant, { via: "marketing_messages" })).toEqual([
          "marketing_messages",
          "marketing_messages"
        ])
        // Another organization's business account knows nothing of this template.
        const other = yield* seedTenant()
        expect(yield* sentTo(other, { via: "auto" })).toEqual(["messages", "messages"])
      }))

    it.effect("the category follows the status update and the completed category update, never the impending one", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* marketingMessages(tenant, "auto")
        yield* postTemplateChange(tenant, "message_template_status_update", {
          event: "APPROVED",
          message_template_id: 1689556908129832,
          message_template_name: TEMPLATE.name,
          message_template_language: TEMPLATE.language,
          reason: "NONE",
          message_template_category: "MARKETING"
        })
        expect(yield* sentTo(tenant)).toEqual(["marketing_messages", "marketing_messages"])
        yield* postTemplateChange(tenant, "template_category_update", completed("UTILITY"))
        expect(yield* sentTo(tenant)).toEqual(["messages", "messages"])
        yield* postTemplateChange(tenant, "template_category_update", {
          message_template_id: 278077987957091,
          message_template_name: TEMPLATE.name,
          message_template_language: "en-US",
          new_category: "UTILITY",
          correct_category: "MARKETING",
          category_update_timestamp: 1746169200
        })
        expect(yield* sentTo(tenant)).toEqual(["messages", "messages"])
      }))

    it.effect("a template created through the hub is known by its category; Meta's refusal at /marketing_messages reaches the caller with its code", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        yield* marketingMessages(tenant, "auto")
        const client = yield* hub.client(tenant.instanceToken)
        yield* client.templates.create({
          payload: {
            name: TEMPLATE.name,
            language: TEMPLATE.language,
            category: "MARKETING",
            components: [{ type: "BODY", text: "Spring sale: 20% off" }]
          }
        })
        expect(yield* sentTo(tenant)).toEqual(["marketing_messages", "marketing_messages"])
        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/marketing_messages` }, {
          status: 400,
          body: { error: { message: "(#131055) Terms of service not accepted", code: 131055, fbtrace_id: "T" } }
        })
        const refused = yield* refusedWith(
          client.messages.send({ payload: typedTemplateSend({}), headers: {} }),
          "UpstreamFailure"
        )
        expect(refused.status).toBe(400)
        expect(refused.details).toMatchObject({ upstream: { code: 131055 } })
        // An unknown `via`: the typed client would refuse to encode it, so it goes raw.
        const via = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: templateSend({ via: "marketing" })
        })
        expect(via.status).toBe(400)
        expect(via.body).toMatchObject({
          details: [{ field: "via", message: "must be auto, messages or marketing_messages" }]
        })
      }))
  })
})

layer(testHub())("the Marketing Messages API on the sandbox", (it) => {
  it.effect("a MARKETING template goes through /marketing_messages; another category is refused there as Meta refuses it", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* hub.client(tenant.instanceToken)
      for (const [name, category] of [["spring_sale", "MARKETING"], ["order_update", "UTILITY"]] as const) {
        yield* client.templates.create({
          payload: { name, language: "en_US", category, components: [{ type: "BODY", text: "Hello" }] }
        })
      }
      const send = (name: string, via: "auto" | "marketing_messages") =>
        client.messages.send({
          payload: {
            ...individualMessage,
            to: "16505551234",
            type: "template",
            template: { name, language: { code: "en_US" } },
            via
          },
          headers: {}
        })
      yield* Effect.flatMap(
        InstancesRepo,
        (repo) => repo.updateInstance(tenant.instanceId, { marketingMessages: "auto" })
      )
      // The sandbox approves after HUB_SANDBOX_APPROVAL_DELAY (10 s by default), on the hub's clock.
      yield* TestClock.adjust(Duration.seconds(10))
      yield* send("spring_sale", "auto")
      yield* send("order_update", "auto")
      const forced = yield* refusedWith(send("order_update", "marketing_messages"), "UpstreamFailure")
      expect(forced.status).toBe(400)
      expect(forced.details).toMatchObject({ upstream: { code: 100 } })
      const records = (yield* client.messages.list({ urlParams: { page: 1, limit: 10 } })).data
      expect(records.map((r) => [r.status === "failed" ? "failed" : "accepted", r.endpoint])).toEqual([
        ["failed", "marketing_messages"],
        ["accepted", "messages"],
        ["accepted", "marketing_messages"]
      ])
    }))
})

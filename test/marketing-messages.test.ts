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
import { itemsOf, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"

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
      json: { object: "whatsapp_business_account", entry: [{ id: tenant.wabaId, time: 1750000000, changes: [{ field, value }] }] }
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

/** Sends and answers which Graph endpoint received it, and the record's endpoint. */
const sentTo = (tenant: Tenant, json: Record<string, unknown> = {}) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const fake = yield* FakeGraph
    const sent = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json: templateSend(json) })
    expect(sent.status).toBe(200)
    const upstream = yield* fake.lastRequest
    expect(upstream.json).toEqual({ messaging_product: "whatsapp", recipient_type: "individual", ...templateSend(), ...withoutVia(json) })
    const id = Array.isArray(sent.body.messages) ? sent.body.messages[0]?.id : undefined
    const [record] = itemsOf((yield* hub.request("GET", `/api/messages?waMessageId=${encodeURIComponent(String(id))}`, { token: tenant.instanceToken })).body)
    return [upstream.path.split("/").pop(), record?.endpoint]
  })

const withoutVia = (json: Record<string, unknown>) => Object.fromEntries(Object.entries(json).filter(([key]) => key !== "via"))

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
        expect(yield* sentTo(tenant, { biz_opaque_callback_data: "campaign-7" })).toEqual(["marketing_messages", "marketing_messages"])
        // The request's `via` wins over the instance's setting, and is never sent upstream.
        expect(yield* sentTo(tenant, { via: "messages" })).toEqual(["messages", "messages"])
        yield* marketingMessages(tenant, "off")
        expect(yield* sentTo(tenant, { via: "auto" })).toEqual(["marketing_messages", "marketing_messages"])
        expect(yield* sentTo(tenant, { via: "marketing_messages" })).toEqual(["marketing_messages", "marketing_messages"])
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
        const created = yield* hub.request("POST", "/templates", {
          token: tenant.instanceToken,
          json: { name: TEMPLATE.name, language: TEMPLATE.language, category: "MARKETING", components: [{ type: "BODY", text: "Spring sale: 20% off" }] }
        })
        expect(created.status).toBe(200)
        expect(yield* sentTo(tenant)).toEqual(["marketing_messages", "marketing_messages"])
        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/marketing_messages` }, {
          status: 400,
          body: { error: { message: "(#131055) Terms of service not accepted", code: 131055, fbtrace_id: "T" } }
        })
        const refused = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json: templateSend() })
        expect(refused.status).toBe(400)
        expect(refused.body).toMatchObject({ statusCode: 400, details: { upstream: { code: 131055 } } })
        const via = yield* hub.request("POST", "/api/messages", { token: tenant.instanceToken, json: templateSend({ via: "marketing" }) })
        expect(via.status).toBe(400)
        expect(via.body).toMatchObject({ details: [{ field: "via", message: "must be auto, messages or marketing_messages" }] })
      }))
  })
})

layer(testHub())("the Marketing Messages API on the sandbox", (it) => {
  it.effect("a MARKETING template goes through /marketing_messages; another category is refused there as Meta refuses it", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      for (const [name, category] of [["spring_sale", "MARKETING"], ["order_update", "UTILITY"]] as const) {
        const created = yield* hub.request("POST", "/templates", {
          token: tenant.instanceToken,
          json: { name, language: "en_US", category, components: [{ type: "BODY", text: "Hello" }] }
        })
        expect(created.status).toBe(200)
      }
      const send = (name: string) =>
        hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { to: "16505551234", type: "template", template: { name, language: { code: "en_US" } }, via: "auto" }
        })
      yield* Effect.flatMap(InstancesRepo, (repo) => repo.updateInstance(tenant.instanceId, { marketingMessages: "auto" }))
      // The sandbox approves after HUB_SANDBOX_APPROVAL_DELAY (10 s by default), on the hub's clock.
      yield* TestClock.adjust(Duration.seconds(10))
      const marketing = yield* send("spring_sale")
      expect(marketing.status).toBe(200)
      const utility = yield* send("order_update")
      expect(utility.status).toBe(200)
      const forced = yield* hub.request("POST", "/api/messages", {
        token: tenant.instanceToken,
        json: { to: "16505551234", type: "template", template: { name: "order_update", language: { code: "en_US" } }, via: "marketing_messages" }
      })
      expect(forced.status).toBe(400)
      expect(forced.body).toMatchObject({ details: { upstream: { code: 100 } } })
      const records = itemsOf((yield* hub.request("GET", "/api/messages?limit=10", { token: tenant.instanceToken })).body)
      expect(records.map((r) => [r.status === "failed" ? "failed" : "accepted", r.endpoint])).toEqual([
        ["failed", "marketing_messages"],
        ["accepted", "messages"],
        ["accepted", "marketing_messages"]
      ])
    }))
})

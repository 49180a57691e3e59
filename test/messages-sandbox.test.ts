/**
 * POST /api/messages through the in-process sandbox (the default upstream): every message type is
 * accepted and recorded, a template send needs an APPROVED template, and the sandbox's reserved
 * recipient prefixes reach the customer as the hub's error mapping says.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { listMessages, sendMessage, typeCases, waIdOf } from "./support/Messages.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"

const TO = "16505551234"

/** Every type but template (the sandbox needs an approved template first: tested on its own below). */
const contentByType = typeCases.map((c) => c.request).filter((request) => request.type !== "template")

const orderTemplate = {
  name: "order_update",
  language: "en_US",
  category: "UTILITY",
  components: [
    { type: "HEADER", format: "IMAGE", example: { header_handle: ["4::aW1hZ2UvanBlZw==:ARb"] } },
    { type: "BODY", text: "Hi {{1}}, order {{2}} is on its way.", example: { body_text: [["Mark", "860198"]] } },
    {
      type: "BUTTONS",
      buttons: [{
        type: "URL",
        text: "Track",
        url: "https://example.com/t/{{1}}",
        example: ["https://example.com/t/860198"]
      }]
    }
  ]
}

const templateSend = {
  to: TO,
  type: "template",
  template: {
    name: "order_update",
    language: { code: "en_US" },
    components: [
      { type: "header", parameters: [{ type: "image", image: { link: "https://example.com/h.jpg" } }] },
      { type: "body", parameters: [{ type: "text", text: "Mark" }, { type: "text", text: "860198" }] },
      { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: "860198" }] }
    ]
  }
}

layer(testHub())("POST /api/messages on the sandbox", (it) => {
  it.effect("accepts every message type, answers the send response and records each send", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const sentIds: Array<string> = []
      for (const content of contentByType) {
        const sent = yield* sendMessage(tenant.instanceToken, { to: `+${TO}`, ...content })
        expect(sent.status, JSON.stringify(content)).toBe(200)
        expect(sent.body).toEqual({
          messaging_product: "whatsapp",
          contacts: [{ input: TO, wa_id: TO }],
          messages: [{ id: expect.stringMatching(/^wamid\./) }]
        })
        sentIds.push(waIdOf(sent.body))
      }
      const listed = yield* listMessages(tenant.instanceToken, "limit=100")
      expect(listed.body.total).toBe(contentByType.length)
      expect(itemsOf(listed.body).map((record) => record.waMessageId).sort()).toEqual([...sentIds].sort())
      expect(itemsOf(listed.body).map((record) => record.type).sort()).toEqual(
        contentByType.map((content) => String(content.type)).sort()
      )
      expect(new Set(itemsOf(listed.body).map((record) => record.status))).toEqual(new Set(["pending"]))
    }))

  it.effect("a template send needs an APPROVED template: 132001 while PENDING, accepted once approved", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const created = yield* hub.request("POST", "/templates", { token: tenant.instanceToken, json: orderTemplate })
      expect(created.status).toBe(200)
      expect(created.body.status).toBe("PENDING")

      const early = yield* sendMessage(tenant.instanceToken, templateSend)
      expect(early.status).toBe(404)
      expect(early.body).toMatchObject({
        statusCode: 404,
        error: "upstream_error",
        details: { upstream: { code: 132001, error_subcode: 2494073 } }
      })

      // The sandbox approves after HUB_SANDBOX_APPROVAL_DELAY (10 s by default), on the hub's clock.
      yield* TestClock.adjust(Duration.seconds(10))
      const sent = yield* sendMessage(tenant.instanceToken, templateSend)
      expect(sent.status).toBe(200)
      expect(sent.body).toEqual({
        messaging_product: "whatsapp",
        contacts: [{ input: TO, wa_id: TO }],
        messages: [{ id: expect.stringMatching(/^wamid\./), message_status: "accepted" }]
      })
      const listed = yield* listMessages(tenant.instanceToken, "limit=100")
      expect(itemsOf(listed.body).map((record) => [record.type, record.status])).toEqual([["template", "pending"], [
        "template",
        "failed"
      ]])
    }))

  it.effect("the sandbox's status events move the record forward to read", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const sent = yield* sendMessage(tenant.instanceToken, { to: TO, type: "text", text: { body: "track me" } })
      expect(sent.status).toBe(200)
      // sent, delivered and read follow, HUB_SANDBOX_STATUS_DELAY (1 s) apart on the hub's clock. Each
      // event is written through the database before the next delay starts, so the clock moves a
      // second at a time while the hub catches up.
      const status = Effect.map(listMessages(tenant.instanceToken), (listed) => itemsOf(listed.body)[0]?.status)
      for (let attempt = 0; attempt < 200 && (yield* status) !== "read"; attempt++) {
        yield* TestClock.adjust(Duration.seconds(1))
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      expect(yield* status).toBe("read")
    }))

  it.effect("a username user: a send to their business-scoped user id is answered without a number and read by it; their message is recorded by it", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const userId = "US.13491208655302741918"
      const sent = yield* sendMessage(tenant.instanceToken, {
        recipient: userId,
        type: "text",
        text: { body: "Your order shipped" }
      })
      expect(sent.status).toBe(200)
      expect(sent.body).toEqual({
        messaging_product: "whatsapp",
        contacts: [{ input: userId, user_id: userId }],
        messages: [{ id: expect.stringMatching(/^wamid\./) }]
      })
      // The statuses name the user by recipient_user_id only; the record still moves to read.
      const status = Effect.map(listMessages(tenant.instanceToken), (listed) => itemsOf(listed.body)[0]?.status)
      for (let attempt = 0; attempt < 200 && (yield* status) !== "read"; attempt++) {
        yield* TestClock.adjust(Duration.seconds(1))
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      expect(yield* status).toBe("read")
      const inbound = yield* hub.request("POST", "/sandbox/inbound", {
        token: tenant.instanceToken,
        json: { user_id: userId, username: "pablomorales", type: "text", text: { body: "Thanks!" } }
      })
      expect(inbound.status).toBe(200)
      const received = itemsOf((yield* listMessages(tenant.instanceToken, "direction=inbound")).body)
      expect(received).toEqual([
        expect.objectContaining({
          waMessageId: inbound.body.id,
          userId,
          username: "pablomorales",
          direction: "inbound"
        })
      ])
      // Neither a number nor a user id: refused, naming what to give.
      const neither = yield* hub.request("POST", "/sandbox/inbound", {
        token: tenant.instanceToken,
        json: { type: "text" }
      })
      expect(neither.status).toBe(400)
      expect(neither.body).toMatchObject({
        details: [{
          field: "from",
          message: "give from (the sender's number), user_id (their business-scoped user id), or both"
        }]
      })
    }))

  it.effect("an authentication template cannot go to a business-scoped user id (131062)", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const sent = yield* sendMessage(tenant.instanceToken, {
        recipient: "US.1349120865",
        type: "text",
        text: { body: "code 123" },
        category: "authentication"
      })
      expect(sent.status).toBe(400)
      expect(sent.body).toMatchObject({ details: { upstream: { code: 131062 } } })
    }))

  const reserved: ReadonlyArray<{
    readonly to: string
    readonly status: number
    readonly error: string
    readonly code?: number
    readonly retryAfter?: string
  }> = [
    { to: "999100555", status: 400, error: "upstream_error", code: 100 },
    { to: "999131030111", status: 400, error: "upstream_error", code: 131030 },
    { to: "999131047111", status: 400, error: "upstream_error", code: 131047 },
    { to: "999200111", status: 403, error: "upstream_error", code: 200 },
    { to: "999130429111", status: 429, error: "upstream_rate_limited", code: 130429, retryAfter: "2" },
    { to: "999131056111", status: 429, error: "upstream_rate_limited", code: 131056, retryAfter: "6" },
    { to: "99980007111", status: 429, error: "upstream_rate_limited", code: 80007, retryAfter: "60" },
    { to: "999190111", status: 502, error: "upstream_auth_failed", code: 190 },
    { to: "999500111", status: 502, error: "upstream_error", code: 131000 },
    { to: "999503111", status: 502, error: "upstream_error", code: 2 }
  ]

  for (const failure of reserved) {
    it.effect(`a recipient starting ${failure.to.slice(0, -3)} answers ${failure.status} and leaves a failed record`, () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const sent = yield* sendMessage(tenant.instanceToken, { to: failure.to, type: "text", text: { body: "hi" } })
        expect(sent.status).toBe(failure.status)
        expect(sent.body).toMatchObject({
          statusCode: failure.status,
          error: failure.error,
          details: { upstream: { code: failure.code } }
        })
        expect(typeof sent.body.message).toBe("string")
        expect(sent.headers.get("retry-after")).toBe(failure.retryAfter ?? null)
        const listed = yield* listMessages(tenant.instanceToken)
        expect(itemsOf(listed.body)).toEqual([
          expect.objectContaining({ to: failure.to, status: "failed", waMessageId: null, direction: "outbound" })
        ])
      }))
  }
})

/**
 * The typed client (src/Client.ts) against a real hub: sends, history, webhooks and errors go through
 * HttpApiClient over HubApi, as a generated client would use the contract. Error answers arrive as
 * the hub's typed errors, decoded from their ErrorBody; every answer is also checked against the
 * OpenAPI document (the client's fetch is checkedFetch).
 */
import { FetchHttpClient } from "@effect/platform"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { makeHubClient } from "../src/Client.js"
import { checkedFetch } from "./support/OpenApiCheck.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { sentNow } from "./support/TypedRequests.js"

const checkedFetchLayer = FetchHttpClient.layer.pipe(
  Layer.provide(Layer.succeed(FetchHttpClient.Fetch, Object.assign(checkedFetch, { preconnect: fetch.preconnect })))
)

const clientFor = (token: string | undefined) =>
  Effect.flatMap(TestHub, (hub) => makeHubClient({ baseUrl: hub.baseUrl, token, httpClient: checkedFetchLayer }))

const TEXT = {
  messaging_product: "whatsapp",
  recipient_type: "individual",
  to: "16505551234",
  type: "text",
  text: { body: "Hello from the typed client" }
} as const

/** The history's query as the client gives it (page and limit have defaults on the hub, not in the decoded type). */
const firstPage = { page: 1, limit: 50 } as const

// One send per second per number, so a second send at once is paced (429); no sandbox status events.
layer(testHub({ sendRateCap: 1, sandboxStatusDelay: Duration.hours(1) }), { excludeTestServices: true })(
  "the typed client",
  (it) => {
    it.effect("sends a message and finds it in the history", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* clientFor(tenant.instanceToken)
        const sent = yield* sentNow(hub.messages.send({ payload: TEXT, headers: {} }))
        expect(sent.messaging_product).toBe("whatsapp")
        const waMessageId = sent.messages[0]?.id
        expect(waMessageId).toMatch(/^wamid\./)
        const history = yield* hub.messages.list({ urlParams: { ...firstPage, waMessageId } })
        expect(history).toMatchObject({ total: 1, page: 1, limit: 50 })
        expect(history.data.map((m) => [m.waMessageId, m.to, m.type, m.direction, m.status])).toEqual([
          [waMessageId, "16505551234", "text", "outbound", "pending"]
        ])
      }))

    it.effect("an organization token names the number; its instances are listed", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* clientFor(tenant.orgToken)
        const instances = yield* hub.instances.list()
        expect(instances.data.map((i) => [i.id, i.phone_number_id])).toEqual([[
          tenant.instanceId,
          tenant.phoneNumberId
        ]])
        const sent = yield* sentNow(hub.messages.send({
          payload: { ...TEXT, phone_number_id: tenant.phoneNumberId },
          headers: {}
        }))
        expect(sent.contacts).toEqual([{ input: "16505551234", wa_id: "16505551234" }])
      }))

    it.effect("registers, lists, updates and deletes a webhook", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* clientFor(tenant.instanceToken)
        // Turned off at once below: nothing is ever delivered to it.
        const created = yield* hub.webhooks.create({ payload: { url: "http://127.0.0.1:9/hooks", name: "receiver" } })
        expect(created).toMatchObject({
          instance_id: tenant.instanceId,
          url: "http://127.0.0.1:9/hooks",
          name: "receiver",
          active: true
        })
        expect(created.secret).toMatch(/^whsec_/)
        const updated = yield* hub.webhooks.update({
          path: { id: created.id },
          payload: { active: false, name: "paused" }
        })
        expect(updated).toMatchObject({ id: created.id, active: false, name: "paused" })
        const listed = yield* hub.webhooks.list({ urlParams: {} })
        expect(listed.data.map((w) => [w.id, w.active])).toEqual([[created.id, false]])
        const deliveries = yield* hub.webhooks.deliveries({ path: { id: created.id }, urlParams: firstPage })
        expect(deliveries).toEqual({ data: [], total: 0, page: 1, limit: 50, cursors: { before: null, after: null } })
        yield* hub.webhooks.remove({ path: { id: created.id } })
        const gone = yield* Effect.flip(hub.webhooks.get({ path: { id: created.id } }))
        expect(gone).toMatchObject({
          _tag: "NotFound",
          message: `webhook ${created.id} was not found`,
          error: "not_found"
        })
      }))

    it.effect("error answers arrive as the hub's typed errors", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* clientFor(tenant.instanceToken)

        // 401: the bare body, decoded into Unauthorized.
        const anonymous = yield* clientFor(undefined)
        const unauthorized = yield* Effect.flip(anonymous.messages.list({ urlParams: firstPage }))
        expect(unauthorized._tag).toBe("Unauthorized")
        expect(unauthorized).toMatchObject({ message: "Unauthorized", statusCode: 401 })

        // 403: an instance token where a session token is needed.
        const forbidden = yield* Effect.flip(hub.apiTokens.create({ payload: { name: "nope" } }))
        expect(forbidden).toMatchObject({ _tag: "Forbidden", error: "forbidden_token_kind", statusCode: 403 })

        // 404
        const missing = yield* Effect.flip(hub.webhooks.get({ path: { id: "wh_missing" } }))
        expect(missing).toMatchObject({ _tag: "NotFound", statusCode: 404, error: "not_found" })

        // 400: an upstream refusal (the sandbox refuses this template name) decodes as UpstreamFailure, not BadRequest.
        const refused = yield* Effect.flip(hub.messages.send({
          payload: {
            messaging_product: "whatsapp",
            recipient_type: "individual",
            to: "16505551234",
            type: "template",
            template: { name: "no_such_template", language: { code: "en_US" } }
          },
          headers: {}
        }))
        expect(refused).toMatchObject({ _tag: "UpstreamFailure", status: 404, error: "upstream_error" })

        // 429: the refused send took the number's one send of this second, so the next is paced.
        const paced = yield* Effect.flip(hub.messages.send({ payload: TEXT, headers: {} }))
        expect(paced).toMatchObject({ _tag: "TooManyRequests", statusCode: 429, error: "rate_limited" })
      }))

    it.effect("a request the hub refuses is a BadRequest", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* clientFor(tenant.orgToken)
        // Valid for the client's schema, but an organization token must name the sending number.
        const invalid = yield* Effect.flip(hub.messages.send({ payload: TEXT, headers: {} }))
        expect(invalid._tag).toBe("BadRequest")
        expect(invalid).toMatchObject({ statusCode: 400, message: expect.stringContaining("phone_number_id") })
      }))
  }
)

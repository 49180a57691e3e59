/**
 * Tenants cannot starve each other: deliveries in flight are bounded per organization as well as
 * per webhook (HUB_DISPATCH_PER_ORGANIZATION). Alone, an organization may take idle slots past its
 * share, but a quarter of all slots stays free: one whose receivers all hang until the timeout holds
 * at most three quarters of the dispatch slots, and another organization's deliveries still start at
 * once. The concurrency here equals what organization A's webhooks could hold by their own shares:
 * without the organization's bound, B would wait for A's timeouts.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Option, Redacted } from "effect"
import { makeReceiver } from "./support/Receivers.js"
import { seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, signBody, wamid } from "./support/UpstreamPayloads.js"

const APP_SECRET = "fairness-app-secret"

const settings = {
  appSecret: Option.some(Redacted.make(APP_SECRET)),
  dispatchConcurrency: 8,
  dispatchPerWebhook: 2,
  dispatchPerOrganization: 4,
  // A's receivers hang: their attempts stay in flight for the whole test.
  webhookTimeout: Duration.seconds(60)
}

layer(testHub(settings), { excludeTestServices: true })("the dispatch share of an organization", (it) => {
  it.scoped("one organization's hanging receivers take idle slots past its share but leave a quarter free; another organization's delivery arrives at once", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const post = (tenant: Tenant) => {
        const body = JSON.stringify(envelope([tenant.wabaId, [inboundChange(tenant, {
          from: "16505551234",
          id: wamid(),
          timestamp: "1750263773",
          type: "text",
          text: { body: "hello" }
        })]]))
        return hub.request("POST", "/upstream/events", {
          body,
          headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
        })
      }
      const register = (tenant: Tenant, url: string) =>
        Effect.map(
          hub.request("POST", "/api/webhooks", { token: tenant.instanceToken, json: { url, name: "r" } }),
          (created) => {
            expect(created.status).toBe(201)
          }
        )

      const a = yield* seedTenant()
      const hanging = yield* Effect.all(Array.from({ length: 4 }, () => makeReceiver(() => "hang")))
      for (const receiver of hanging) yield* register(a, receiver.url)
      // Four events to each of A's four webhooks: sixteen deliveries, each webhook's share (2) would allow eight.
      for (let n = 0; n < 4; n++) expect((yield* post(a)).status).toBe(200)
      const received = () => hanging.reduce((total, receiver) => total + receiver.requests.length, 0)
      // Alone, A takes its share (4) and idle slots up to six of the eight: wait until those six hang at the receivers.
      yield* Effect.forEach(hanging, (receiver) => receiver.waitFor("A's attempts", () => received() >= 6), {
        discard: true
      })

      const b = yield* seedTenant()
      const healthy = yield* makeReceiver()
      yield* register(b, healthy.url)
      expect((yield* post(b)).status).toBe(200)
      yield* healthy.waitFor("B's delivery, while A's attempts hang", (requests) => requests.length === 1)
      // A never took the free quarter meanwhile.
      expect(received()).toBe(6)
    }))
})

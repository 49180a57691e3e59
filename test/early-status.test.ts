/**
 * A status event can reach the hub before the send that caused it has recorded its upstream id (the
 * upstream answers the send and fires "sent" at once). The early event is kept and applied on acceptance.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { engines } from "./support/Databases.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { seedTenant, type Tenant, TestHub } from "./support/TestHub.js"
import { envelope, status, statusChange } from "./support/UpstreamPayloads.js"

const statusEvent = (tenant: Tenant, waMessageId: string, state: string) =>
  envelope([tenant.wabaId, [statusChange(tenant, status(waMessageId, state, 1750263773))]])

const sendAnswering = (tenant: Tenant, waMessageId: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const fake = yield* FakeGraph
    yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
      body: {
        messaging_product: "whatsapp",
        contacts: [{ input: "15551234567", wa_id: "15551234567" }],
        messages: [{ id: waMessageId }]
      }
    })
    const sent = yield* hub.request("POST", "/api/messages", {
      token: tenant.instanceToken,
      json: { to: "15551234567", type: "text", text: { body: "hi" } }
    })
    expect(sent.status).toBe(200)
    const listed = yield* hub.request("GET", `/api/messages?waMessageId=${waMessageId}`, {
      token: tenant.instanceToken
    })
    return listed.body
  })

for (const engine of engines) {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })(
    `status events that arrive before the send is recorded (${engine})`,
    (it) => {
      it.effect("the best early status is applied when the send is accepted", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          for (const state of ["sent", "delivered"]) {
            const posted = yield* hub.request("POST", "/upstream/events", {
              json: statusEvent(tenant, "wamid.EARLY1", state)
            })
            expect(posted.status).toBe(200)
          }
          const listed = yield* sendAnswering(tenant, "wamid.EARLY1")
          expect(listed).toMatchObject({
            total: 1,
            data: [{ waMessageId: "wamid.EARLY1", status: "delivered", direction: "outbound" }]
          })
          // Each early step keeps its time on the record's timeline.
          const at = new Date(1750263773 * 1000).toISOString()
          expect(listed).toMatchObject({ data: [{ statusTimes: { sent: at, delivered: at } }] })
        }))

      it.effect("without early events an accepted send stays pending, and a later event still moves it", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const tenant = yield* seedTenant()
          const listed = yield* sendAnswering(tenant, "wamid.LATER1")
          expect(listed).toMatchObject({ data: [{ status: "pending" }] })
          yield* hub.request("POST", "/upstream/events", { json: statusEvent(tenant, "wamid.LATER1", "read") })
          const after = yield* hub.request("GET", "/api/messages?waMessageId=wamid.LATER1", {
            token: tenant.instanceToken
          })
          expect(after.body).toMatchObject({ data: [{ status: "read" }] })
        }))

      it.effect("an early event of another instance does not touch this instance's send", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const mine = yield* seedTenant()
          const theirs = yield* seedTenant()
          yield* hub.request("POST", "/upstream/events", { json: statusEvent(theirs, "wamid.SHARED1", "read") })
          const listed = yield* sendAnswering(mine, "wamid.SHARED1")
          expect(listed).toMatchObject({ data: [{ status: "pending" }] })
        }))
    }
  )
}

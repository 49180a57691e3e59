/**
 * Replay and poll (issue 33) in a fleet of two replicas on one PostgreSQL database, in this process
 * (as test/fleet.test.ts): a long poll on one replica answers an event posted to the other (whose
 * bus it does not hear: it asks the database); a replay started on one is read, and its
 * Idempotency-Key answered, on the other, and its deliveries go out from either dispatcher.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { Webhook } from "standardwebhooks"
import { isRecord } from "../src/Domain/Json.js"
import { freshPostgresDatabase } from "./support/Databases.js"
import { makeReceiver } from "./support/Receivers.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, META_MESSAGES, wamid } from "./support/UpstreamPayloads.js"

const twoReplicas = Effect.gen(function*() {
  const url = yield* freshPostgresDatabase
  const replica = () => Layer.build(testHub({ engine: "postgres", databaseFile: url }))
  return { a: yield* replica(), b: yield* replica() }
})

type Replica = Context.Context<TestHub>

const request = (
  replica: Replica,
  method: string,
  path: string,
  options: Parameters<TestHub["Type"]["request"]>[2] = {}
) => Effect.provide(Effect.flatMap(TestHub, (hub) => hub.request(method, path, options)), replica)

describe("replay and poll in a fleet of two replicas on PostgreSQL", () => {
  it.live("a long poll on one replica answers an event posted to the other", () =>
    Effect.gen(function*() {
      const { a, b } = yield* twoReplicas
      const tenant = yield* Effect.provide(seedTenant(), a)
      const created = yield* request(a, "POST", "/api/webhooks", {
        token: tenant.instanceToken,
        json: { name: "pull", kind: "poll" }
      })
      expect(created.status).toBe(201)
      const id = String(created.body.id)
      const waiting = yield* Effect.fork(
        request(b, "GET", `/api/webhooks/${id}/poll?wait=20`, { token: tenant.instanceToken })
      )
      const event = envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.text, id: wamid() })]])
      expect((yield* request(a, "POST", "/upstream/events", { json: event })).status).toBe(200)
      const answer = yield* Fiber.join(waiting)
      const [polled] = itemsOf(answer.body, "data")
      const body = String(polled?.body)
      expect(JSON.parse(body)).toEqual(event)
      const headers: Readonly<Record<string, unknown>> = isRecord(polled?.headers) ? polled.headers : {}
      const header = (name: string) => String(headers[name] ?? "")
      expect(
        new Webhook(String(created.body.secret)).verify(body, {
          "webhook-id": header("webhook-id"),
          "webhook-timestamp": header("webhook-timestamp"),
          "webhook-signature": header("webhook-signature")
        })
      ).toEqual(event)
    }).pipe(Effect.scoped), { timeout: 30_000 })

  it.live(
    "a replay started on one replica is followed and repeated on the other, and delivered",
    () =>
      Effect.gen(function*() {
        const { a, b } = yield* twoReplicas
        const tenant = yield* Effect.provide(seedTenant(), a)
        const since = new Date(Date.now() - 1000).toISOString()
        const events = [0, 1].map(() =>
          envelope([tenant.wabaId, [inboundChange(tenant, { ...META_MESSAGES.text, id: wamid() })]])
        )
        for (const event of events) {
          expect((yield* request(b, "POST", "/upstream/events", { json: event })).status).toBe(200)
        }
        const receiver = yield* makeReceiver()
        const created = yield* request(a, "POST", "/api/webhooks", {
          token: tenant.instanceToken,
          json: { name: "backfilled", url: receiver.url }
        })
        const id = String(created.body.id)
        const replay = (replica: Replica) =>
          request(replica, "POST", `/api/webhooks/${id}/replay`, {
            token: tenant.instanceToken,
            json: { since },
            headers: { "idempotency-key": "fleet-replay" }
          })
        const started = yield* replay(a)
        expect(started.body).toMatchObject({ queued: 2 })
        const repeated = yield* replay(b)
        expect(repeated.body.id).toBe(started.body.id)
        const received = yield* receiver.waitFor("both events", (r) => r.length === 2)
        // Both, each once; in either order: the webhook is not ordered, and its two deliveries go at once.
        expect(received.map((r) => JSON.parse(r.body))).toEqual(expect.arrayContaining(events))
        const progress = yield* request(b, "GET", `/api/webhooks/${id}/replays/${String(started.body.id)}`, {
          token: tenant.instanceToken
        })
        expect(progress.status).toBe(200)
        expect(progress.body.queued).toBe(2)
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )
})

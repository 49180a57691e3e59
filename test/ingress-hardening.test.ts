/**
 * What a stranger can do to POST /upstream/events before its signature is checked: the bytes all
 * unverified posts hold are bounded together (HUB_INGRESS_UNVERIFIED_MB), and past the bound a post is
 * answered 503 with Retry-After at once, its body never read; room comes back as posts finish.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { connect, type Socket } from "node:net"
import { makeReceiver } from "./support/Receivers.js"
import { createWebhookId, itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, inboundChange, type JsonObject, META_MESSAGES, wamid } from "./support/UpstreamPayloads.js"

const MB = 1024 * 1024

/** A post whose head and first bytes are sent, the rest held back until `finish`; its answer as text. */
const heldPost = (base: string, declared: number) =>
  Effect.async<{ readonly socket: Socket; readonly answer: Promise<string>; readonly finish: (body: string) => void }>(
    (resume) => {
      const url = new URL(base)
      const socket = connect(Number(url.port), url.hostname)
      let received = ""
      const answer = new Promise<string>((resolve) => {
        socket.on("data", (chunk) => {
          received += chunk.toString("utf8")
          if (/\r\n\r\n[\s\S]*\}/.test(received)) resolve(received)
        })
        socket.on("close", () => resolve(received))
      })
      socket.on("connect", () => {
        socket.write(
          `POST /upstream/events HTTP/1.1\r\nHost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`
        )
        resume(Effect.succeed({
          socket,
          answer,
          // The body so far is the first bytes of a JSON object padded with spaces to the declared length.
          finish: (body: string) => socket.write(body.padEnd(declared, " "))
        }))
      })
    }
  )

const EMPTY_POST = JSON.stringify({ object: "whatsapp_business_account", entry: [] })

const logged: Array<{ readonly level: string; readonly message: string }> = []
const capture = Logger.make(({ logLevel, message }) => {
  logged.push({ level: logLevel.label, message: [message].flat().map(String).join(" ") })
})

layer(
  testHub(
    { ingressUnverifiedMaxBytes: 2 * MB },
    Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Info))
  )
)("unverified upstream posts", (it) => {
  it.scoped("hold at most HUB_INGRESS_UNVERIFIED_MB between them; past it 503 with Retry-After before the body is read", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const first = yield* heldPost(hub.baseUrl, MB)
      const second = yield* heldPost(hub.baseUrl, MB)
      yield* Effect.addFinalizer(() => Effect.sync(() => [first, second].forEach((p) => p.socket.destroy())))
      // Both posts are being read (each holds its declared megabyte) once the hub answers a probe past the bound.
      const refused = yield* Effect.promise(async () => {
        for (;;) {
          const answer = await fetch(`${hub.baseUrl}/upstream/events`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: EMPTY_POST
          })
          if (answer.status === 503) return answer
          await Bun.sleep(10)
        }
      })
      expect(refused.headers.get("retry-after")).toBe("1")
      expect(yield* Effect.promise(() => refused.json())).toEqual({
        statusCode: 503,
        message: "The hub holds as many unverified upstream posts as it may (HUB_INGRESS_UNVERIFIED_MB); retry shortly",
        error: "overloaded"
      })
      // A held post that completes is answered, and gives its room back.
      first.finish(EMPTY_POST)
      expect(yield* Effect.promise(() => first.answer)).toMatch(/^HTTP\/1\.1 200/)
      const accepted = yield* hub.request("POST", "/upstream/events", { json: JSON.parse(EMPTY_POST) })
      expect(accepted.status).toBe(200)
      // A post that goes away mid-body gives its room back too.
      second.socket.destroy()
      const again = yield* Effect.promise(async () => {
        for (;;) {
          const big = await fetch(`${hub.baseUrl}/upstream/events`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: EMPTY_POST.padEnd(MB + 10, " ")
          })
          if (big.status !== 503) return big.status
          await Bun.sleep(10)
        }
      })
      expect(again).toBe(200)
      // The abort is the poster's doing: a warning, never an error.
      expect(logged.filter((line) => line.message.startsWith("An upstream post was aborted")).map((line) => line.level))
        .toEqual(["WARN"])
      expect(logged.filter((line) => line.level === "ERROR")).toEqual([])
    }))
})

/** A Unix time of an hour ago, as the upstream writes it. */
const RECENT = String(Math.floor(Date.now() / 1000) - 3600)

/** Inbound text messages from `from`, at Unix time `seconds` (as text, the upstream's form). */
const textAt = (id: string, seconds: string) => ({ ...META_MESSAGES.text, id, timestamp: seconds })

describe.each(["sqlite", "postgres"] as const)("what the upstream sends, validated and clamped (%s)", (engine) => {
  layer(testHub({ engine, sandboxStatusDelay: Duration.hours(1), retention: Duration.days(30) }), {
    excludeTestServices: true
  })("", (it) => {
    it.scoped("one change with a time out of range fails nothing: both tenants' changes are stored, recorded and delivered; no 500", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const [a, b] = [yield* seedTenant(), yield* seedTenant()]
        const receiverA = yield* makeReceiver()
        const receiverB = yield* makeReceiver()
        yield* createWebhookId(a, receiverA.url)
        yield* createWebhookId(b, receiverB.url)
        const [odd, fine] = [wamid(), wamid()]
        // One post carrying both organizations' changes, the first with a time Date cannot hold.
        const posted = yield* hub.request("POST", "/upstream/events", {
          json: envelope([a.wabaId, [inboundChange(a, textAt(odd, "99999999999999"))]], [b.wabaId, [
            inboundChange(b, textAt(fine, RECENT))
          ]])
        })
        expect(posted.status).toBe(200)
        expect(posted.body).toEqual({ changes: 2, accepted: 2, duplicates: 0, unrouted: 0, deliveries: 2, stale: 0 })
        // Delivered as received, the odd time unchanged.
        const [toA] = yield* receiverA.waitFor("A's delivery", (r) => r.length === 1)
        expect(toA?.body).toContain("\"99999999999999\"")
        yield* receiverB.waitFor("B's delivery", (r) => r.length === 1)
        // Recorded: the odd time is not believed, the record carries its receipt time instead.
        const listA = yield* hub.request("GET", `/api/messages?waMessageId=${odd}`, { token: a.instanceToken })
        const recordA = itemsOf(listA.body)[0]
        expect(recordA).toMatchObject({ direction: "inbound", waMessageId: odd })
        expect(Date.parse(String(recordA?.createdAt))).toBeGreaterThan(Date.now() - 60_000)
        const listB = yield* hub.request("GET", `/api/messages?waMessageId=${fine}`, { token: b.instanceToken })
        expect(itemsOf(listB.body)[0]).toMatchObject({
          waMessageId: fine,
          createdAt: new Date(Number(RECENT) * 1000).toISOString()
        })
      }))

    it.effect("a post nested deeper than 64 levels is a 400 for that post alone", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        let deep: JsonObject = { end: true }
        for (let i = 0; i < 5000; i++) deep = { a: deep }
        const refused = yield* hub.request("POST", "/upstream/events", {
          json: envelope([tenant.wabaId, [{
            field: "messages",
            value: { metadata: { phone_number_id: tenant.phoneNumberId }, extra: deep }
          }]])
        })
        expect(refused.status).toBe(400)
        expect(refused.body).toMatchObject({
          statusCode: 400,
          error: "validation_failed",
          details: [{ field: "body", message: "must not nest deeper than 64 levels" }]
        })
        const ok = yield* hub.request("POST", "/upstream/events", {
          json: envelope([tenant.wabaId, [inboundChange(tenant, textAt(wamid(), RECENT))]])
        })
        expect(ok.body).toMatchObject({ accepted: 1 })
      }))

    it.scoped("a post whose changes are all older than HUB_RETENTION is a replay: 200, kept aside as stale, not delivered", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const receiver = yield* makeReceiver()
        yield* createWebhookId(tenant, receiver.url)
        const old = String(Math.floor((Date.now() - 31 * 24 * 3600_000) / 1000))
        const replayed = wamid()
        const replay = yield* hub.request("POST", "/upstream/events", {
          json: envelope([tenant.wabaId, [inboundChange(tenant, textAt(replayed, old))]])
        })
        expect(replay.status).toBe(200)
        expect(replay.body).toEqual({ changes: 1, accepted: 0, duplicates: 0, unrouted: 0, deliveries: 0, stale: 1 })
        const sql = yield* SqlClient.SqlClient
        const kept = yield* sql<
          { readonly reason: string; readonly change_json: string }
        >`SELECT reason, change_json FROM unrouted_events WHERE reason = 'stale' AND change_json LIKE ${`%${replayed}%`}`
        expect(kept).toHaveLength(1)
        expect(kept[0]?.change_json).toContain(replayed)
        const listed = yield* hub.request("GET", `/api/messages?waMessageId=${replayed}`, {
          token: tenant.instanceToken
        })
        expect(itemsOf(listed.body)).toEqual([])
        // A post with one recent change among old ones is not a replay: it is delivered.
        const mixed = yield* hub.request("POST", "/upstream/events", {
          json: envelope([tenant.wabaId, [
            inboundChange(tenant, textAt(wamid(), old)),
            inboundChange(tenant, textAt(wamid(), String(Math.floor(Date.now() / 1000))))
          ]])
        })
        expect(mixed.body).toMatchObject({ accepted: 2, deliveries: 1, stale: 0 })
        const [delivered] = yield* receiver.waitFor("the mixed post", (r) => r.length >= 1)
        expect(delivered?.body).not.toContain(replayed)
      }))
  })
})

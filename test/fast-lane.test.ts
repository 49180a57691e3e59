/**
 * The fast lane (src/Edge/FastLane.ts) against HubApi's own handlers: the same hub (one database, one set of
 * services) is served twice, by the hub's server with the fast lane's Bun routes and by a plain Bun
 * server running only HttpApi, whose declarations of the two endpoints hand their requests to the same
 * handlers: the routing test. Every request is sent both ways. The answers must be alike:
 * status, content type, body (byte for byte, upstream message ids aside) and the edge's headers.
 * A counting HotRoutes proves which requests the fast lane actually served.
 */
import { HttpMiddleware } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Context, Duration, Effect, HashMap, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { type HotRoute, HotRoutes } from "../src/Domain/PlainRoute.js"
import { hubServer } from "../src/Edge/FastLane.js"
import { HttpLive, hubLayer } from "../src/Http.js"
import { HostResolver } from "../src/Net/UrlPolicy.js"
import { whileAcceptanceRefused } from "./support/Messages.js"
import {
  type HttpResult,
  itemsOf,
  type RequestOptions,
  seedTenant,
  type Tenant,
  TestHub,
  testHubConfig,
  TestHubLive
} from "./support/TestHub.js"
import { envelope, signBody, status, statusChange } from "./support/UpstreamPayloads.js"

const APP_SECRET = "fast-lane-app-secret"
const VERIFY_TOKEN = "fast-lane-verify-token"

/** The same hub served by HttpApi alone (no fast lane), on a server of its own. */
class PlainHub extends Context.Tag("test/PlainHub")<PlainHub, Context.Tag.Service<TestHub>>() {}

type Hits = Readonly<Record<HotRoute, number>>

/** How many requests each hot route's installed handler has served. */
class FastLaneHits extends Context.Tag("test/FastLaneHits")<FastLaneHits, {
  readonly snapshot: () => Hits
  readonly record: (route: HotRoute) => void
}>() {}

const FastLaneHitsLive = Layer.sync(FastLaneHits, () => {
  const hits: Record<HotRoute, number> = { "POST /api/messages": 0, "POST /upstream/events": 0 }
  return FastLaneHits.of({
    snapshot: () => ({ ...hits }),
    record: (route) => void hits[route]++
  })
})

const hitsBetween = (before: Hits, after: Hits): Hits => ({
  "POST /api/messages": after["POST /api/messages"] - before["POST /api/messages"],
  "POST /upstream/events": after["POST /upstream/events"] - before["POST /upstream/events"]
})

const NO_HITS: Hits = { "POST /api/messages": 0, "POST /upstream/events": 0 }

/** The hub's own server (hubServer), its HotRoutes wrapped to count what the fast lane serves. */
const countingHubServer = Layer.effect(
  HotRoutes,
  Effect.gen(function*() {
    const routes = yield* HotRoutes
    const hits = yield* FastLaneHits
    return HotRoutes.of({
      install: (route, handler) =>
        routes.install(route, (request) => {
          hits.record(route)
          return handler(request)
        }),
      serve: routes.serve
    })
  })
).pipe(Layer.provideMerge(hubServer({ port: 0, hostname: "127.0.0.1" })))

/**
 * HttpLive (HubApi, its handlers and the edge) on a plain Bun server without routes, over the services
 * of the hub below. Both layers are fresh: HttpLive and TestHubLive are also part of the hub, and a
 * layer used twice in one graph is otherwise built once.
 */
const PlainHubLive = Layer.effect(PlainHub, TestHub).pipe(
  Layer.provide(Layer.fresh(TestHubLive)),
  Layer.merge(Layer.fresh(HttpLive)),
  Layer.provide(BunHttpServer.layer({ port: 0, hostname: "127.0.0.1" })),
  // As hubLayer runs the hub's server.
  Layer.provide(Layer.setTracerEnabled(false)),
  HttpMiddleware.withTracerDisabledWhen(() => true)
)

const hubs = PlainHubLive.pipe(
  Layer.provideMerge(TestHubLive),
  Layer.provideMerge(hubLayer(countingHubServer)),
  Layer.provide(HostResolver.System),
  Layer.provideMerge(FastLaneHitsLive),
  Layer.provideMerge(testHubConfig({
    databaseFile: ":memory:",
    appSecret: Option.some(Redacted.make(APP_SECRET)),
    verifyToken: Option.some(Redacted.make(VERIFY_TOKEN)),
    // No sandbox status events during these tests: they would move the records under the assertions.
    sandboxStatusDelay: Duration.hours(1)
  })),
  Layer.provide(Logger.minimumLogLevel(LogLevel.None))
)

interface BothWays {
  readonly fast: HttpResult
  readonly plain: HttpResult
  /** Requests the fast lane served while each was answered. */
  readonly fastLaneHits: { readonly fast: Hits; readonly plain: Hits }
}

/** Sends a request to the hub (fast lane installed) and then to the plain HttpApi server. */
const bothWays = (method: string, path: string, options: RequestOptions = {}, plainOptions: RequestOptions = options) =>
  Effect.gen(function*() {
    const hits = yield* FastLaneHits
    const fastHub = yield* TestHub
    const plainHub = yield* PlainHub
    expect(fastHub.baseUrl).not.toBe(plainHub.baseUrl)
    const before = hits.snapshot()
    const fast = yield* fastHub.request(method, path, options)
    const between = hits.snapshot()
    const plain = yield* plainHub.request(method, path, plainOptions)
    return {
      fast,
      plain,
      fastLaneHits: { fast: hitsBetween(before, between), plain: hitsBetween(between, hits.snapshot()) }
    } satisfies BothWays
  })

const HOT_SEND: HotRoute = "POST /api/messages"
const HOT_EVENTS: HotRoute = "POST /upstream/events"

const GENERATED_REQUEST_ID = /^[0-9a-f]{8}-[0-9a-z]+$/

/** Upstream message and trace ids differ by nature; everything else in a body must not. */
const withoutWamids = (text: string) =>
  text.replace(/"wamid\.[A-Za-z0-9+/=_-]+"/g, "\"wamid.*\"").replace(/"fbtrace_id":"[^"]*"/g, "\"fbtrace_id\":\"*\"")

/**
 * Both answers alike: status, content type, the headers the contract names, and the body text
 * (upstream message ids aside). `hot`: the fast-lane route that must have served the hub's answer
 * (none: HttpApi must have); the plain server never reaches the fast lane.
 */
const expectAlike = (answers: BothWays, hot: HotRoute | undefined) => {
  const { fast, plain } = answers
  const served = hot === undefined ? NO_HITS : { ...NO_HITS, [hot]: 1 }
  expect(answers.fastLaneHits.fast).toEqual(served)
  // HubApi's declaration hands the request to the same handler, unless its own middleware refused it first.
  expect([NO_HITS, served]).toContainEqual(answers.fastLaneHits.plain)
  expect(fast.status).toBe(plain.status)
  expect(fast.headers.get("content-type")).toBe(plain.headers.get("content-type"))
  for (const header of ["idempotent-replayed", "retry-after"]) {
    expect(fast.headers.get(header), header).toBe(plain.headers.get(header))
  }
  expect(withoutWamids(fast.text)).toBe(withoutWamids(plain.text))
  for (const answer of [fast, plain]) expect(answer.headers.get("x-request-id")).toMatch(/^[A-Za-z0-9._-]{1,64}$/)
  return fast
}

const TEXT = { to: "16505551234", type: "text", text: { body: "hi" } }

const sendBody = (json: unknown, extra: RequestOptions = {}): RequestOptions => ({ json, ...extra })

const listTotal = (tenant: Tenant) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const listed = yield* hub.request("GET", "/api/messages", { token: tenant.instanceToken })
    expect(listed.status).toBe(200)
    return Number(listed.body.total)
  })

/** A signed POST /upstream/events, as the upstream sends it. */
const signedEvents = (body: string, secret: string = APP_SECRET): RequestOptions => ({
  body,
  headers: { "content-type": "application/json", "x-hub-signature-256": signBody(secret, body) }
})

layer(hubs, { excludeTestServices: true })("POST /api/messages: the fast lane answers as HubApi does", (it) => {
  it.effect("a valid text send: the sandbox upstream's answer, and a record, either way", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const answers = yield* bothWays("POST", "/api/messages", sendBody(TEXT, { token: tenant.instanceToken }))
      const fast = expectAlike(answers, HOT_SEND)
      expect(fast.status).toBe(200)
      expect(fast.headers.get("content-type")).toBe("application/json")
      expect(fast.headers.get("idempotent-replayed")).toBeNull()
      for (const answer of [answers.fast, answers.plain]) {
        expect(answer.body).toEqual({
          messaging_product: "whatsapp",
          contacts: [{ input: "16505551234", wa_id: "16505551234" }],
          messages: [{ id: expect.stringMatching(/^wamid\.[A-Za-z0-9+/=_-]+$/) }]
        })
      }
      const fastId = String(itemsOf(answers.fast.body, "messages")[0]?.id)
      const plainId = String(itemsOf(answers.plain.body, "messages")[0]?.id)
      expect(fastId).not.toBe(plainId)
      // Both sends were made and recorded in the one database.
      const hub = yield* TestHub
      const listed = yield* hub.request("GET", "/api/messages", { token: tenant.instanceToken })
      expect(itemsOf(listed.body).map((m) => [m.waMessageId, m.status, m.type, m.to]).sort()).toEqual([
        [fastId, "pending", "text", "16505551234"],
        [plainId, "pending", "text", "16505551234"]
      ].sort())
    }))

  it.effect("no token, a wrong scheme or an unknown token: 401 with the bare Unauthorized body", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const cases: ReadonlyArray<readonly [string, RequestOptions]> = [
        ["missing", sendBody(TEXT)],
        ["basic scheme", sendBody(TEXT, { headers: { authorization: `Basic ${tenant.instanceToken}` } })],
        ["unknown token", sendBody(TEXT, { token: `${tenant.instanceToken}x` })],
        // Authentication comes before the body is read: a bad body does not change the answer.
        ["missing, with a malformed body", { body: "{", headers: { "content-type": "application/json" } }]
      ]
      for (const [name, options] of cases) {
        const fast = expectAlike(yield* bothWays("POST", "/api/messages", options), HOT_SEND)
        expect(fast.status, name).toBe(401)
        expect(fast.text, name).toBe(JSON.stringify({ statusCode: 401, message: "Unauthorized" }))
      }
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("a session token: 403 forbidden_token_kind, before the body is looked at", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      for (const body of [TEXT, { to: "x" }]) {
        const fast = expectAlike(
          yield* bothWays("POST", "/api/messages", sendBody(body, { token: tenant.sessionToken })),
          HOT_SEND
        )
        expect(fast.status).toBe(403)
        expect(fast.body).toEqual({
          statusCode: 403,
          message:
            "This endpoint needs an organization token or an instance token; a session token cannot be used here",
          error: "forbidden_token_kind"
        })
      }
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("an invalid body: 400 validation_failed listing every field issue", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const invalid = { to: "x", type: "text", text: { body: "" }, context: {} }
      // An invalid Idempotency-Key as well: the body's issues are reported first. (Only the way every
      // request comes: HttpApi checks the headers HubApi declares before it hands a request over.)
      const hub = yield* TestHub
      const withBadKey = yield* hub.request(
        "POST",
        "/api/messages",
        sendBody(invalid, { token: tenant.instanceToken, headers: { "idempotency-key": "has space" } })
      )
      for (
        const fast of [
          expectAlike(
            yield* bothWays("POST", "/api/messages", sendBody(invalid, { token: tenant.instanceToken })),
            HOT_SEND
          ),
          withBadKey
        ]
      ) {
        expect(fast.status).toBe(400)
        expect(fast.body.error).toBe("validation_failed")
        expect(fast.body.statusCode).toBe(400)
        expect(itemsOf(fast.body, "details").map((d) => d.field).sort()).toEqual([
          "context.message_id",
          "text.body",
          "to"
        ])
        expect(String(fast.body.message)).toMatch(/^Invalid request: /)
        for (const field of ["to:", "text.body:", "context.message_id:"]) {
          expect(String(fast.body.message)).toContain(field)
        }
      }
      const notAnObject = expectAlike(
        yield* bothWays("POST", "/api/messages", sendBody("send hi", { token: tenant.instanceToken })),
        HOT_SEND
      )
      expect(notAnObject.status).toBe(400)
      expect(itemsOf(notAnObject.body, "details").map((d) => d.field)).toEqual(["body"])
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("malformed JSON (with, without a content type, or no body at all): 400 malformed_body", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const cases: ReadonlyArray<RequestOptions> = [
        {
          token: tenant.instanceToken,
          body: "{\"to\": \"16505551234\",",
          headers: { "content-type": "application/json" }
        },
        {
          token: tenant.instanceToken,
          body: "{\"to\"",
          headers: { "content-type": "application/json; charset=utf-8" }
        },
        { token: tenant.instanceToken, body: "not json" },
        { token: tenant.instanceToken }
      ]
      for (const options of cases) {
        const fast = expectAlike(yield* bothWays("POST", "/api/messages", options), HOT_SEND)
        expect(fast.status).toBe(400)
        expect(fast.text).toBe(
          JSON.stringify({
            statusCode: 400,
            message: "Malformed request body: it is not valid JSON",
            error: "malformed_body"
          })
        )
      }
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("a body without a content type is read as JSON either way", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const fast = expectAlike(
        yield* bothWays("POST", "/api/messages", { token: tenant.instanceToken, body: JSON.stringify(TEXT) }),
        HOT_SEND
      )
      expect(fast.status).toBe(200)
      expect(yield* listTotal(tenant)).toBe(2)
    }))

  it.effect("a body of another content type is read as HttpApi reads it: refused alike, nothing sent", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      for (const contentType of ["text/plain", "application/octet-stream", "application/x-www-form-urlencoded"]) {
        const options = {
          token: tenant.instanceToken,
          body: JSON.stringify(TEXT),
          headers: { "content-type": contentType }
        }
        const fast = expectAlike(yield* bothWays("POST", "/api/messages", options), HOT_SEND)
        expect(fast.status).toBe(400)
      }
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("an invalid Idempotency-Key header: 400 naming the header; nothing is sent", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      for (const key of ["has space", "k".repeat(256), "clé"]) {
        const fast = expectAlike(
          yield* bothWays(
            "POST",
            "/api/messages",
            sendBody(TEXT, { token: tenant.instanceToken, headers: { "idempotency-key": key } })
          ),
          HOT_SEND
        )
        expect(fast.status).toBe(400)
        expect(fast.body).toEqual({
          statusCode: 400,
          message: "Invalid request: idempotency-key: must be 1 to 255 visible ASCII characters",
          error: "validation_failed",
          details: [{ field: "idempotency-key", message: "must be 1 to 255 visible ASCII characters" }]
        })
      }
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("an Idempotency-Key replay: the first answer again, marked idempotent-replayed, whichever way either came", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const fastHub = yield* TestHub
      const plainHub = yield* PlainHub
      const keyed = (key: string) =>
        sendBody(TEXT, { token: tenant.instanceToken, headers: { "idempotency-key": key } })

      // Each key is first used one way, then replayed both ways.
      const firstFast = yield* fastHub.request("POST", "/api/messages", keyed("fast-first"))
      const firstPlain = yield* plainHub.request("POST", "/api/messages", keyed("plain-first"))
      for (const first of [firstFast, firstPlain]) {
        expect(first.status).toBe(200)
        expect(first.headers.get("idempotent-replayed")).toBeNull()
      }
      expect(withoutWamids(firstFast.text)).toBe(withoutWamids(firstPlain.text))

      for (const [key, first] of [["fast-first", firstFast], ["plain-first", firstPlain]] as const) {
        const replays = yield* bothWays("POST", "/api/messages", keyed(key))
        expectAlike(replays, HOT_SEND)
        for (const replay of [replays.fast, replays.plain]) {
          expect(replay.status).toBe(200)
          expect(replay.headers.get("idempotent-replayed")).toBe("true")
          expect(replay.headers.get("content-type")).toBe("application/json")
          // The very same answer, upstream message id included.
          expect(replay.text).toBe(first.text)
        }
      }
      // Two sends, not six.
      expect(yield* listTotal(tenant)).toBe(2)

      // The same key with another body is a conflict either way.
      const reused = yield* bothWays(
        "POST",
        "/api/messages",
        sendBody({ ...TEXT, text: { body: "another" } }, {
          token: tenant.instanceToken,
          headers: { "idempotency-key": "fast-first" }
        })
      )
      const conflict = expectAlike(reused, HOT_SEND)
      expect(conflict.status).toBe(409)
      expect(conflict.body).toMatchObject({ statusCode: 409, error: "idempotency_key_reused" })
    }))

  it.effect("x-request-id: generated on every answer, a sane caller's id echoed, an insane one replaced", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const generated = yield* bothWays("POST", "/api/messages", sendBody(TEXT, { token: tenant.instanceToken }))
      expectAlike(generated, HOT_SEND)
      const ids = [generated.fast, generated.plain].map((a) => a.headers.get("x-request-id"))
      for (const id of ids) expect(id).toMatch(GENERATED_REQUEST_ID)
      expect(ids[0]).not.toBe(ids[1])

      for (const options of [sendBody(TEXT, { token: tenant.instanceToken }), sendBody(TEXT)]) {
        const sane = "trace-42.abc_DEF"
        const echoed = yield* bothWays("POST", "/api/messages", { ...options, headers: { "x-request-id": sane } })
        expectAlike(echoed, HOT_SEND)
        expect(echoed.fast.headers.get("x-request-id")).toBe(sane)
        expect(echoed.plain.headers.get("x-request-id")).toBe(sane)

        for (const insane of ["has space", "x".repeat(65), "semi;colon"]) {
          const replaced = yield* bothWays("POST", "/api/messages", { ...options, headers: { "x-request-id": insane } })
          expectAlike(replaced, HOT_SEND)
          for (const answer of [replaced.fast, replaced.plain]) {
            expect(answer.headers.get("x-request-id")).toMatch(GENERATED_REQUEST_ID)
          }
        }
      }
    }))

  it.effect("an organization token: it names the number (the first send looks the instance up, later ones know it), or is refused alike", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const other = yield* seedTenant()
      for (const round of ["first use", "known"]) {
        const fast = expectAlike(
          yield* bothWays(
            "POST",
            "/api/messages",
            sendBody({ ...TEXT, phone_number_id: tenant.phoneNumberId }, { token: tenant.orgToken })
          ),
          HOT_SEND
        )
        expect(fast.status, round).toBe(200)
      }
      const unnamed = expectAlike(
        yield* bothWays("POST", "/api/messages", sendBody(TEXT, { token: tenant.orgToken })),
        HOT_SEND
      )
      expect(unnamed.status).toBe(400)
      expect(unnamed.body).toMatchObject({ statusCode: 400, message: expect.stringContaining("phone_number_id") })
      // Another organization's number is not found, as an unknown one is.
      for (const phoneNumberId of [other.phoneNumberId, "123456789012345"]) {
        const foreign = expectAlike(
          yield* bothWays(
            "POST",
            "/api/messages",
            sendBody({ ...TEXT, phone_number_id: phoneNumberId }, { token: tenant.orgToken })
          ),
          HOT_SEND
        )
        expect(foreign.status).toBe(404)
        expect(foreign.body).toEqual({
          statusCode: 404,
          message: `phone_number_id ${phoneNumberId} was not found`,
          error: "not_found"
        })
      }
      expect(yield* listTotal(tenant)).toBe(4)
    }))

  it.effect("upstream refusals keep their status, message and details.upstream, alike", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const refusals = [
        { to: "999100555", status: 400, error: "upstream_error", code: 100 },
        { to: "999200111", status: 403, error: "upstream_error", code: 200 },
        { to: "999132001111", status: 404, error: "upstream_error", code: 132001 },
        { to: "999190111", status: 502, error: "upstream_auth_failed", code: 190 },
        { to: "999503111", status: 502, error: "upstream_error", code: 2 }
      ] as const
      for (const refusal of refusals) {
        const fast = expectAlike(
          yield* bothWays(
            "POST",
            "/api/messages",
            sendBody({ ...TEXT, to: refusal.to }, { token: tenant.instanceToken })
          ),
          HOT_SEND
        )
        expect(fast.status, refusal.to).toBe(refusal.status)
        expect(fast.body, refusal.to).toMatchObject({
          statusCode: refusal.status,
          error: refusal.error,
          details: { upstream: { code: refusal.code } }
        })
        expect(fast.headers.get("retry-after"), refusal.to).toBeNull()
      }
    }))

  // The hub's own pacing answers through the same send core and edge; it is left out here because it
  // depends on the wall clock (80 sends a second refill while a test spends them).
  it.effect("429: the upstream's throttling, with Retry-After, alike", () =>
    Effect.gen(function*() {
      const throttled = yield* seedTenant()
      const upstream = expectAlike(
        yield* bothWays(
          "POST",
          "/api/messages",
          sendBody({ ...TEXT, to: "999130429111" }, { token: throttled.instanceToken })
        ),
        HOT_SEND
      )
      expect(upstream.status).toBe(429)
      expect(upstream.body).toMatchObject({
        statusCode: 429,
        error: "upstream_rate_limited",
        details: { upstream: { code: 130429 } }
      })
      expect(upstream.headers.get("retry-after")).toBe("2")
    }))

  it.effect("503: a send whose record cannot be written is refused alike, and nothing is sent", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      // A trigger stands in for a failing database, for the one statement under test.
      yield* sql`CREATE TRIGGER refuse_message_insert BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'disk full'); END`
      const answers = yield* bothWays("POST", "/api/messages", sendBody(TEXT, { token: tenant.instanceToken })).pipe(
        Effect.ensuring(Effect.orDie(sql`DROP TRIGGER refuse_message_insert`))
      )
      const fast = expectAlike(answers, HOT_SEND)
      expect(fast.status).toBe(503)
      expect(fast.body).toEqual({
        statusCode: 503,
        message: "The message could not be recorded, so it was not sent",
        error: "storage_unavailable"
      })
      expect(yield* listTotal(tenant)).toBe(0)
    }))

  it.effect("GET /api/messages and other methods on the path are not on the fast lane, and answer alike", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const fastHub = yield* TestHub
      expect((yield* fastHub.request("POST", "/api/messages", sendBody(TEXT, { token: tenant.instanceToken }))).status)
        .toBe(200)

      const listed = expectAlike(
        yield* bothWays("GET", "/api/messages?limit=5", { token: tenant.instanceToken }),
        undefined
      )
      expect(listed.status).toBe(200)
      expect(listed.body).toMatchObject({ total: 1, page: 1, limit: 5 })
      expect(itemsOf(listed.body)).toHaveLength(1)

      const unauthenticated = expectAlike(yield* bothWays("GET", "/api/messages"), undefined)
      expect(unauthenticated.status).toBe(401)

      const badQuery = expectAlike(
        yield* bothWays("GET", "/api/messages?limit=0", { token: tenant.instanceToken }),
        undefined
      )
      expect(badQuery.status).toBe(400)
      expect(badQuery.body.error).toBe("validation_failed")

      for (const method of ["PUT", "DELETE", "PATCH"]) {
        const other = expectAlike(
          yield* bothWays(method, "/api/messages", sendBody(TEXT, { token: tenant.instanceToken })),
          undefined
        )
        expect(other.status).toBe(404)
        expect(other.body).toEqual({
          statusCode: 404,
          message: `No route for ${method} /api/messages`,
          error: "route_not_found"
        })
      }
    }))
})

layer(hubs, { excludeTestServices: true })("POST /upstream/events: the fast lane answers as HubApi does", (it) => {
  it.effect("a bad or missing signature: 401, nothing stored", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const body = JSON.stringify(
        envelope([tenant.wabaId, [statusChange(tenant, status("wamid.unsigned", "sent", 1750263773))]])
      )
      const cases: ReadonlyArray<RequestOptions> = [
        signedEvents(body, "another-secret"),
        { body, headers: { "content-type": "application/json" } },
        { body, headers: { "content-type": "application/json", "x-hub-signature-256": "sha256=zz" } },
        // Signed, but the signature covers other bytes.
        {
          body: `${body} `,
          headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
        }
      ]
      for (const options of cases) {
        const fast = expectAlike(yield* bothWays("POST", "/upstream/events", options), HOT_EVENTS)
        expect(fast.status).toBe(401)
        expect(fast.text).toBe(JSON.stringify({ statusCode: 401, message: "Unauthorized" }))
      }
      // Nothing was ingested: the same change, validly signed now, is new (and then a duplicate).
      const accepted = yield* bothWays("POST", "/upstream/events", signedEvents(body))
      expect(accepted.fastLaneHits.fast).toEqual({ ...NO_HITS, [HOT_EVENTS]: 1 })
      expect(accepted.fast.body).toEqual({
        changes: 1,
        accepted: 1,
        duplicates: 0,
        unrouted: 0,
        deliveries: 0,
        stale: 0
      })
      expect(accepted.plain.body).toEqual({
        changes: 1,
        accepted: 0,
        duplicates: 1,
        unrouted: 0,
        deliveries: 0,
        stale: 0
      })
    }))

  it.effect("a malformed body: 400 malformed_body; an envelope of the wrong shape: 400 validation_failed", () =>
    Effect.gen(function*() {
      for (const body of ["{\"object\":", "[1,2]", ""]) {
        const fast = expectAlike(yield* bothWays("POST", "/upstream/events", signedEvents(body)), HOT_EVENTS)
        expect(fast.status).toBe(400)
        expect(fast.text).toBe(
          JSON.stringify({
            statusCode: 400,
            message: "Malformed request body: it is not a JSON object",
            error: "malformed_body"
          })
        )
      }
      const shape = JSON.stringify({
        object: "whatsapp_business_account",
        entry: [{ id: "1", changes: [{ field: "messages" }] }, 7]
      })
      const fast = expectAlike(yield* bothWays("POST", "/upstream/events", signedEvents(shape)), HOT_EVENTS)
      expect(fast.status).toBe(400)
      expect(fast.body).toMatchObject({
        statusCode: 400,
        error: "validation_failed",
        details: [
          { field: "entry.0.changes.0.value", message: "must be an object" },
          { field: "entry.1", message: "must be an object" }
        ]
      })
    }))

  it.effect("a body over 8 MB: 413 payload_too_large", () =>
    Effect.gen(function*() {
      const body = JSON.stringify({
        object: "whatsapp_business_account",
        entry: [],
        padding: "x".repeat(8 * 1024 * 1024)
      })
      const fast = expectAlike(yield* bothWays("POST", "/upstream/events", signedEvents(body)), HOT_EVENTS)
      expect(fast.status).toBe(413)
      expect(fast.body).toEqual({
        statusCode: 413,
        message: "The event payload is larger than 8 MB",
        error: "payload_too_large"
      })
    }))

  it.effect("a valid status payload: 200 with the ingest summary, applied to the message either way; a repeat is a duplicate", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const fastHub = yield* TestHub
      const sendOne = Effect.map(
        fastHub.request("POST", "/api/messages", sendBody(TEXT, { token: tenant.instanceToken })),
        (sent) => {
          expect(sent.status).toBe(200)
          return String(itemsOf(sent.body, "messages")[0]?.id)
        }
      )
      const first = yield* sendOne
      const second = yield* sendOne
      const delivered = (id: string) =>
        signedEvents(
          JSON.stringify(envelope([tenant.wabaId, [statusChange(tenant, status(id, "delivered", 1750263790))]]))
        )

      // Each way gets its own message's status: both are new.
      const fresh = yield* bothWays("POST", "/upstream/events", delivered(first), delivered(second))
      const accepted = expectAlike(fresh, HOT_EVENTS)
      expect(accepted.status).toBe(200)
      expect(accepted.headers.get("content-type")).toBe("application/json")
      expect(accepted.body).toEqual({ changes: 1, accepted: 1, duplicates: 0, unrouted: 0, deliveries: 0, stale: 0 })

      // Then each way gets the other's: both are duplicates.
      const repeated = yield* bothWays("POST", "/upstream/events", delivered(second), delivered(first))
      const duplicate = expectAlike(repeated, HOT_EVENTS)
      expect(duplicate.status).toBe(200)
      expect(duplicate.body).toEqual({ changes: 1, accepted: 0, duplicates: 1, unrouted: 0, deliveries: 0, stale: 0 })

      // Both statuses were committed before the answers.
      const listed = yield* fastHub.request("GET", "/api/messages", { token: tenant.instanceToken })
      expect(itemsOf(listed.body).map((m) => [m.waMessageId, m.status]).sort()).toEqual(
        [[first, "delivered"], [second, "delivered"]].sort()
      )

      // A number the hub does not know is unrouted, either way.
      const stranger = { phoneNumberId: "999000111222333", wabaId: "888000111222333" }
      const unknown = (id: string) =>
        signedEvents(
          JSON.stringify(envelope([stranger.wabaId, [statusChange(stranger, status(id, "read", 1750263795))]]))
        )
      const unrouted = expectAlike(
        yield* bothWays("POST", "/upstream/events", unknown("wamid.stranger.1"), unknown("wamid.stranger.2")),
        HOT_EVENTS
      )
      expect(unrouted.body).toEqual({ changes: 1, accepted: 0, duplicates: 0, unrouted: 1, deliveries: 0, stale: 0 })
    }))

  it.effect("x-request-id: a sane caller's id is echoed on the fast lane's answers too", () =>
    Effect.gen(function*() {
      const answers = yield* bothWays("POST", "/upstream/events", {
        body: "{}",
        headers: { "x-request-id": "meta-delivery-7" }
      })
      const fast = expectAlike(answers, HOT_EVENTS)
      expect(fast.status).toBe(401)
      expect(answers.fast.headers.get("x-request-id")).toBe("meta-delivery-7")
      expect(answers.plain.headers.get("x-request-id")).toBe("meta-delivery-7")
    }))

  it.effect("the GET handshake is served by HttpApi, as before", () =>
    Effect.gen(function*() {
      const ok = yield* bothWays(
        "GET",
        `/upstream/events?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444`
      )
      const fast = expectAlike(ok, undefined)
      expect(fast.status).toBe(200)
      expect(fast.text).toBe("1158201444")
      expect(fast.headers.get("content-type")).toContain("text/plain")

      for (
        const query of [
          `hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=1`,
          `hub.mode=unsubscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1`,
          ""
        ]
      ) {
        const refused = expectAlike(yield* bothWays("GET", `/upstream/events?${query}`), undefined)
        expect(refused.status, query).toBe(403)
        expect(refused.body).toEqual({
          statusCode: 403,
          message: "Webhook verification failed: hub.mode must be subscribe and hub.verify_token must match",
          error: "verification_failed"
        })
      }
      const other = expectAlike(yield* bothWays("PUT", "/upstream/events", { body: "{}" }), undefined)
      expect(other.status).toBe(404)
      expect(other.body.error).toBe("route_not_found")
    }))
})

/** Log lines as the hub wrote them: the message and its annotations. */
class CapturedLogs extends Context.Tag("test/CapturedLogs")<CapturedLogs, {
  /** The lines logged under this request id, in order. */
  readonly linesFor: (
    requestId: string | null
  ) => ReadonlyArray<{ readonly message: string; readonly annotations: Readonly<Record<string, unknown>> }>
}>() {}

const loggingHub = Layer.unwrapEffect(Effect.sync(() => {
  const lines: Array<{ readonly message: string; readonly annotations: Readonly<Record<string, unknown>> }> = []
  const capture = Logger.make(({ annotations, message }) => {
    lines.push({
      message: [message].flat().map(String).join(" "),
      annotations: Object.fromEntries(HashMap.toEntries(annotations))
    })
  })
  return TestHubLive.pipe(
    Layer.provideMerge(hubLayer(hubServer({ port: 0, hostname: "127.0.0.1" }))),
    Layer.provide(HostResolver.System),
    Layer.provideMerge(testHubConfig({
      databaseFile: ":memory:",
      appSecret: Option.some(Redacted.make(APP_SECRET)),
      logLevel: LogLevel.Info,
      sandboxStatusDelay: Duration.hours(1)
    })),
    Layer.merge(
      Layer.succeed(
        CapturedLogs,
        CapturedLogs.of({ linesFor: (requestId) => lines.filter((line) => line.annotations.requestId === requestId) })
      )
    ),
    Layer.provide(Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Info)))
  )
}))

layer(loggingHub, { excludeTestServices: true })("POST /upstream/events on the fast lane: its log lines", (it) => {
  it.effect("each answer has its access line, with the request id it answered with; unknown numbers are warned of under that id", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const logs = yield* CapturedLogs
      const tenant = yield* seedTenant()

      const ok = yield* hub.request(
        "POST",
        "/upstream/events",
        signedEvents(
          JSON.stringify(envelope([tenant.wabaId, [statusChange(tenant, status("wamid.logs.1", "sent", 1750263790))]]))
        )
      )
      expect(ok.status).toBe(200)
      expect(ok.body).toEqual({ changes: 1, accepted: 1, duplicates: 0, unrouted: 0, deliveries: 0, stale: 0 })
      const okId = ok.headers.get("x-request-id")
      expect(okId).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/)
      expect(
        logs.linesFor(okId).map((
          line
        ) => [line.message, line.annotations.method, line.annotations.path, line.annotations.status])
      )
        .toEqual([["request", "POST", "/upstream/events", 200]])

      const stranger = { phoneNumberId: "999000111222444", wabaId: "888000111222444" }
      const strangerPost = signedEvents(
        JSON.stringify(
          envelope([stranger.wabaId, [statusChange(stranger, status("wamid.logs.2", "read", 1750263795))]])
        )
      )
      const unrouted = yield* hub.request("POST", "/upstream/events", {
        ...strangerPost,
        headers: { ...strangerPost.headers, "x-request-id": "meta-post-42" }
      })
      expect(unrouted.body).toEqual({ changes: 1, accepted: 0, duplicates: 0, unrouted: 1, deliveries: 0, stale: 0 })
      expect(unrouted.headers.get("x-request-id")).toBe("meta-post-42")
      const warned = logs.linesFor("meta-post-42")
      expect(warned.map((line) => line.message)).toEqual([
        "Upstream changes for unknown numbers were kept aside (unrouted_events)",
        "request"
      ])
      expect(warned[0]?.annotations).toMatchObject({ count: 1, numbers: stranger.phoneNumberId })

      // A refusal is rendered and logged by the edge, as before.
      const refused = yield* hub.request("POST", "/upstream/events", signedEvents("{}", "another-secret"))
      expect(refused.status).toBe(401)
      expect(logs.linesFor(refused.headers.get("x-request-id")).map((line) => line.annotations.status)).toEqual([401])
    }))
})

layer(loggingHub, { excludeTestServices: true })("POST /api/messages: a send's error logs", (it) => {
  it.effect("name the request they belong to, whether the send ran as an effect (first use of a token) or plainly (after)", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const logs = yield* CapturedLogs
      const tenant = yield* seedTenant()
      const send = (requestId: string) =>
        hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: { to: "16505551234", type: "text", text: { body: "hi" } },
          headers: { "x-request-id": requestId }
        })
      const unrecorded = "The upstream accepted a send the hub could not mark accepted; the record stays pending"
      const [first, second] = yield* whileAcceptanceRefused(
        Effect.all([send("send-log-first"), Effect.suspend(() => send("send-log-second"))])
      )
      expect([first.status, second.status]).toEqual([200, 200])
      for (const requestId of ["send-log-first", "send-log-second"]) {
        // The message, then its ids (an object; the capture shows it as such).
        expect(logs.linesFor(requestId).map((line) => line.message)).toEqual([
          `${unrecorded} [object Object]`,
          "request"
        ])
      }
    }))
})

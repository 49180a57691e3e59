/**
 * The Graph upstream's two clients against a raw receiver standing in for the Graph API: the send
 * over our own kept-alive connections (src/Upstream/GraphSend.ts over src/Net/Pool.ts), every other
 * call over @effect/platform's fetch client. Sends share one connection and a send is never sent
 * twice; the deadline covers the answer's body; an answer past 16 MB is refused; a HEAD answer has
 * no body; a header that would break the request is refused unsent either way; and the calls in
 * flight to the Graph API, sends and others together, stay within HUB_MAX_CONNECTIONS_PER_ORIGIN.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Either, Layer, Redacted } from "effect"
import { hubConfigWith, type HubSettings, hubSettings } from "../src/Config.js"
import { Metrics } from "../src/Metrics/Metrics.js"
import { originOf } from "../src/Net/Connection.js"
import { makeKeepAlivePool } from "../src/Net/Pool.js"
import { requestBytes } from "../src/Net/RequestHead.js"
import { GraphUpstream } from "../src/Upstream/Graph.js"
import { makeGraphSend, usesProxy } from "../src/Upstream/GraphSend.js"
import { Upstream, type UpstreamTarget } from "../src/Upstream/Upstream.js"
import { rawReceiver, type Reply } from "./support/RawReceiver.js"

const json = (status: number, body: unknown, extra = "") => {
  const text = JSON.stringify(body)
  return {
    bytes: `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\n${extra}content-length: ${
      Buffer.byteLength(text)
    }\r\n\r\n${text}`
  }
}

const target = (accessToken = "token-1"): UpstreamTarget => ({
  phoneNumberId: "123",
  wabaId: "456",
  accessToken: Redacted.make(accessToken)
})
const accepted = { messaging_product: "whatsapp", contacts: [{ input: "1" }], messages: [{ id: "wamid.1" }] }

/** A GraphSend over a kept-alive pool closed with the scope. */
const pooledSend = (port: number, timeout = Duration.seconds(5)) =>
  Effect.map(
    Effect.acquireRelease(Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 8, maxPerOrigin: 64 })), (pool) =>
      Effect.sync(() => pool.close())),
    (pool) => {
      const send = makeGraphSend({ graphUrl: `http://127.0.0.1:${port}/v23.0`, timeout, pool })
      return (message: Record<string, string>, to = target()) =>
        Effect.promise(() => send(to, message))
    }
  )

/** A whole request without a body (an empty buffer if refused, which the tests would show). */
const requestOf = (method: string, path: string, port: number): Buffer => {
  const bytes = requestBytes(method, path, `127.0.0.1:${port}`, {}, "")
  return bytes instanceof Buffer ? bytes : Buffer.alloc(0)
}

/** The GraphUpstream service against the Graph API at `port`. */
const graphUpstream = (port: number, overrides: Partial<HubSettings> = {}) =>
  Effect.provide(
    Upstream,
    Layer.provide(
      GraphUpstream,
      Layer.merge(
        hubConfigWith({
          upstream: "graph",
          graphUrl: `http://127.0.0.1:${port}/v23.0`,
          graphRetryBase: Duration.millis(1),
          ...overrides
        }),
        Metrics.Off
      )
    )
  )

describe("the Graph send over kept-alive connections", () => {
  it.scoped("sends share one connection; the request and the answer are exact, a chunked answer included", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        json(200, accepted),
        {
          bytes:
            `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n8\r\n{"messag\r\n${
              (JSON.stringify(accepted).length - 8).toString(16)
            }\r\n${JSON.stringify(accepted).slice(8)}\r\n0\r\n\r\n`
        },
        json(400, { error: { code: 100, message: "bad" } }, "www-authenticate: OAuth\r\n")
      ]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? json(200, {}))
      const send = yield* pooledSend(graph.port)
      expect(yield* send({ to: "15551234567", text: "hé" })).toEqual(Either.right(accepted))
      expect(yield* send({ to: "2" })).toEqual(Either.right(accepted))
      const refused = yield* send({ to: "3" })
      expect(Either.isLeft(refused) && [refused.left.status, refused.left.code, refused.left.message]).toEqual([
        400,
        100,
        "bad"
      ])

      expect(graph.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([
        [0, "POST /v23.0/123/messages HTTP/1.1"],
        [0, "POST /v23.0/123/messages HTTP/1.1"],
        [0, "POST /v23.0/123/messages HTTP/1.1"]
      ])
      const body = JSON.stringify({ to: "15551234567", text: "hé" })
      expect(graph.requests[0]?.body).toBe(body)
      expect(graph.requests[0]?.head.split("\r\n").slice(1)).toEqual([
        `host: 127.0.0.1:${graph.port}`,
        "authorization: Bearer token-1",
        "user-agent: messaging-hub/0.1",
        "content-type: application/json",
        "accept: application/json",
        `content-length: ${Buffer.byteLength(body)}`
      ])
    }))

  it.scoped("a send whose kept connection closes before the answer fails and is not sent again", () =>
    Effect.gen(function*() {
      // The second request on each connection finds it closed, as when the server's idle timeout races it.
      const counts = new Map<number, number>()
      const graph = yield* rawReceiver((request) => {
        const n = (counts.get(request.connection) ?? 0) + 1
        counts.set(request.connection, n)
        return n === 2 ? "close" : json(200, accepted)
      })
      const send = yield* pooledSend(graph.port)
      expect(Either.isRight(yield* send({ to: "warm" }))).toBe(true)
      const sent = yield* send({ to: "1" })
      expect(Either.isLeft(sent) && sent.left.kind).toBe("network")
      expect(graph.requests.map((r) => [r.connection, r.body])).toEqual([[0, "{\"to\":\"warm\"}"], [
        0,
        "{\"to\":\"1\"}"
      ]])
    }))

  it.scoped("a HEAD answer ends with its head, whatever length it announces, and the connection carries the next request", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 200 OK\r\ncontent-type: image/jpeg\r\ncontent-length: 48213\r\n\r\n" },
        json(200, { id: "2" })
      ]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? json(200, {}))
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 8, maxPerOrigin: 8 })),
        (p) => Effect.sync(() => p.close())
      )
      const origin = originOf(new URL(`http://127.0.0.1:${graph.port}`))
      const request = (method: string, path: string) =>
        Effect.promise(() =>
          pool.request({
            origin,
            bytes: requestOf(method, path, graph.port),
            resendable: true,
            headRequest: method === "HEAD",
            kept: { bytes: 1024, whole: true },
            signal: new AbortController().signal
          })
        )
      const head = yield* request("HEAD", "/v23.0/media/1")
      expect(head._tag === "Answer" && [head.answer.status, head.answer.body.toString()]).toEqual([200, ""])
      const next = yield* request("GET", "/v23.0/2")
      expect(next._tag === "Answer" && next.answer.body.toString()).toBe("{\"id\":\"2\"}")
      expect(graph.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([
        [0, "HEAD /v23.0/media/1 HTTP/1.1"],
        [0, "GET /v23.0/2 HTTP/1.1"]
      ])
    }))
})

describe("the Graph upstream's other calls over @effect/platform's fetch client", () => {
  it.scoped("a read and a write reach the Graph API as asked, and their answers are read", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [json(200, { id: "t1", name: "first" }), json(200, { success: true })]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? json(200, {}))
      const upstream = yield* graphUpstream(graph.port)
      expect(yield* upstream.getTemplate(target(), "t1")).toEqual({ id: "t1", name: "first" })
      expect(yield* upstream.updateSettings(target(), { calling: { status: "ENABLED" } })).toEqual({ success: true })
      expect(graph.requests.map((r) => r.head.split("\r\n")[0])).toEqual([
        "GET /v23.0/t1 HTTP/1.1",
        "POST /v23.0/123/settings HTTP/1.1"
      ])
      expect(graph.requests[1]?.body).toBe(JSON.stringify({ calling: { status: "ENABLED" } }))
    }))

  it.scoped("the deadline covers the answer's body: a call whose body stalls, or that is never answered, is a timeout", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [{
        bytes: "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":"
      }, "hang"]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? "hang")
      const upstream = yield* graphUpstream(graph.port, { graphTimeout: Duration.millis(200) })
      const stalled = yield* Effect.flip(upstream.getTemplate(target(), "1"))
      expect(stalled.kind).toBe("timeout")
      expect(stalled.message).toContain("the template lookup")
      const unanswered = yield* Effect.flip(upstream.createTemplate(target(), { name: "x" }))
      expect(unanswered.kind).toBe("timeout")
      // A timeout is not retried, even for a read.
      expect(graph.requests.length).toBe(2)
    }))

  it.scoped("an answer past 16 MB is refused while it is read", () =>
    Effect.gen(function*() {
      const big = `{"x":"${"a".repeat(16 * 1024 * 1024)}"}`
      const graph = yield* Effect.acquireRelease(
        Effect.sync(() =>
          Bun.serve({
            hostname: "127.0.0.1",
            port: 0,
            fetch: () => new Response(big, { headers: { "content-type": "application/json" } })
          })
        ),
        (server) => Effect.sync(() => server.stop(true))
      )
      const upstream = yield* graphUpstream(graph.port ?? 0)
      const refused = yield* Effect.flip(upstream.createTemplate(target(), {}))
      expect([refused.kind, refused.message]).toEqual([
        "network",
        "The upstream answered the template creation with more than 16 MB"
      ])
    }))

  it.scoped("a header that would break the request is refused before a byte is written, on either client", () =>
    Effect.gen(function*() {
      const graph = yield* rawReceiver(() => json(200, accepted))
      const upstream = yield* graphUpstream(graph.port)
      const token = target("token\r\nx-injected: 1")
      const read = yield* Effect.flip(upstream.getTemplate(token, "1"))
      const sent = yield* Effect.promise(() => upstream.sendMessage(token, { to: "1" }))
      expect([read.kind, read.message]).toEqual(["network", "the header \"authorization\" cannot be sent"])
      expect(Either.isLeft(sent) && [sent.left.kind, sent.left.message]).toEqual([
        "network",
        "the header \"authorization\" cannot be sent"
      ])
      expect([graph.connections(), graph.bytesReceived()]).toEqual([0, 0])
    }))
})

describe("HUB_MAX_CONNECTIONS_PER_ORIGIN and the Graph API", () => {
  it.scoped("sends and other calls together: at most that many in flight, the others wait their turn", () =>
    Effect.gen(function*() {
      let inFlight = 0
      let peak = 0
      const server = yield* Effect.acquireRelease(
        Effect.sync(() =>
          Bun.serve({
            hostname: "127.0.0.1",
            port: 0,
            fetch: async () => {
              inFlight += 1
              peak = Math.max(peak, inFlight)
              await Bun.sleep(20)
              inFlight -= 1
              return Response.json(accepted)
            }
          })
        ),
        (s) => Effect.sync(() => s.stop(true))
      )
      const upstream = yield* graphUpstream(server.port ?? 0, { maxConnectionsPerOrigin: 2 })
      const calls = Array.from({ length: 12 }, (_, i) =>
        i % 2 === 0
          ? Effect.map(Effect.promise(() => upstream.sendMessage(target(), { to: String(i) })), Either.isRight)
          : Effect.as(upstream.getTemplate(target(), String(i)), true))
      const answered = yield* Effect.all(calls, { concurrency: "unbounded" })
      expect(answered).toEqual(Array.from({ length: 12 }, () => true))
      expect(peak).toBe(2)
    }))

  it.scoped("the sends' pool takes its cap from it", () =>
    Effect.gen(function*() {
      // The API never answers: each send holds its connection until its deadline, so uncapped sends would each open one.
      const graph = yield* rawReceiver(() => "hang")
      const upstream = yield* graphUpstream(graph.port, {
        graphTimeout: Duration.millis(300),
        maxConnectionsPerOrigin: 1
      })
      const sends = yield* Effect.all(
        Array.from({ length: 3 }, () => Effect.promise(() => upstream.sendMessage(target(), { to: "1" }))),
        { concurrency: "unbounded" }
      )
      expect(sends.map((sent) => Either.isLeft(sent) && sent.left.kind)).toEqual(["timeout", "timeout", "timeout"])
      expect(graph.peakConnections()).toBe(1)
    }))

  it.scoped("a place held for another client's exchange closes an idle connection to make room, and the next request waits for it", () =>
    Effect.gen(function*() {
      const graph = yield* rawReceiver(() => json(200, { ok: true }))
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 8, maxPerOrigin: 1 })),
        (p) => Effect.sync(() => p.close())
      )
      const origin = originOf(new URL(`http://127.0.0.1:${graph.port}`))
      const request = () =>
        pool.request({
          origin,
          bytes: requestOf("GET", "/v23.0/1", graph.port),
          resendable: true,
          headRequest: false,
          kept: { bytes: 1024, whole: true },
          signal: new AbortController().signal
        })
      expect((yield* Effect.promise(request))._tag).toBe("Answer")
      const giveBack = yield* Effect.promise(() => pool.hold(origin, new AbortController().signal))
      yield* Effect.promise(() => graph.whenClosed(1))
      // At the cap: another hold gives up with its signal, a request waits until the place is given back.
      const aborted = new AbortController()
      const waiting = pool.hold(origin, aborted.signal)
      aborted.abort()
      expect(yield* Effect.promise(() => waiting)).toBeUndefined()
      let answered = false
      const next = request().then((outcome) => {
        answered = true
        return outcome
      })
      yield* Effect.promise(() => Bun.sleep(20))
      expect([answered, graph.requests.length]).toEqual([false, 1])
      giveBack?.()
      expect((yield* Effect.promise(() => next))._tag).toBe("Answer")
      expect([graph.connections(), graph.peakConnections()]).toEqual([2, 1])
    }))

  it.effect("it is 256 unless set, and must be a whole number of at least 1", () =>
    Effect.gen(function*() {
      const read = (value: string | undefined) =>
        Effect.either(
          Effect.withConfigProvider(
            hubSettings,
            ConfigProvider.fromMap(new Map(value === undefined ? [] : [["HUB_MAX_CONNECTIONS_PER_ORIGIN", value]]))
          )
        )
      const setting = (value: string | undefined) =>
        Effect.map(read(value), Either.map((settings) => settings.maxConnectionsPerOrigin))
      expect(yield* setting(undefined)).toEqual(Either.right(256))
      expect(yield* setting("8")).toEqual(Either.right(8))
      for (const bad of ["0", "-3", "many", "1.5"]) {
        const refused = yield* read(bad)
        expect(Either.isLeft(refused) && String(refused.left)).toContain("HUB_MAX_CONNECTIONS_PER_ORIGIN")
      }
    }))

  it("the send stays on fetch when a proxy is configured, since the pool connects directly", () => {
    expect(usesProxy({})).toBe(false)
    expect(usesProxy({ HTTPS_PROXY: "" })).toBe(false)
    expect(usesProxy({ https_proxy: "http://proxy:3128" })).toBe(true)
    expect(usesProxy({ HTTP_PROXY: "http://proxy:3128" })).toBe(true)
  })
})

/**
 * The Graph client's calls over kept-alive connections (src/Upstream/FetchClient.ts with a pool from
 * src/Net/KeepAlive.ts), against a raw receiver standing in for the Graph API: calls share one
 * connection, a message send is never sent twice, a read is, the deadline still holds, a HEAD answer
 * has no body, a header that would break the request is refused unsent, and connections are capped.
 */
import { describe, expect, it } from "@effect/vitest"
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { ConfigProvider, Duration, Effect, Either, Layer, Redacted } from "effect"
import { hubConfigWith, hubSettings } from "../src/Config.js"
import { makeKeepAlivePool } from "../src/Net/Pool.js"
import { isTimeout, makeFetchClient } from "../src/Upstream/FetchClient.js"
import { GraphUpstream } from "../src/Upstream/Graph.js"
import { usesProxy } from "../src/Upstream/PooledClient.js"
import { Upstream } from "../src/Upstream/Upstream.js"
import { rawReceiver, type Reply } from "./support/RawReceiver.js"

const json = (status: number, body: unknown, extra = "") => {
  const text = JSON.stringify(body)
  return { bytes: `HTTP/1.1 ${status} X\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}` }
}

const pooledClient = (timeout = Duration.seconds(5), maxPerOrigin = 64) =>
  Effect.map(
    Effect.acquireRelease(Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 8, maxPerOrigin })), (pool) => Effect.sync(() => pool.close())),
    (pool) => makeFetchClient({ timeout, pool })
  )

describe("Graph calls over kept-alive connections", () => {
  it.scoped("reads and writes share one connection; the request and the answer are exact", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        json(200, { id: "1", name: "first" }),
        { bytes: "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\n8\r\n{\"messag\r\nd\r\nes\":[{\"id\":1}\r\n2\r\n]}\r\n0\r\n\r\n" },
        json(400, { error: { code: 100 } }, "www-authenticate: OAuth\r\n")
      ]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? json(200, {}))
      const client = yield* pooledClient()
      const base = `http://127.0.0.1:${graph.port}/v23.0`
      const read = yield* client.execute(HttpClientRequest.get(`${base}/123`, { urlParams: { fields: "id,name" } }))
      expect(read.status).toBe(200)
      expect(yield* read.json).toEqual({ id: "1", name: "first" })
      const sent = yield* client.execute(HttpClientRequest.post(`${base}/123/messages`).pipe(
        HttpClientRequest.bearerToken("token-1"),
        HttpClientRequest.bodyUnsafeJson({ to: "15551234567", text: { body: "hé" } })
      ))
      expect(yield* sent.json).toEqual({ messages: [{ id: 1 }] })
      const refused = yield* client.execute(HttpClientRequest.del(`${base}/media/9`))
      expect([refused.status, refused.headers["www-authenticate"], yield* refused.json]).toEqual([400, "OAuth", { error: { code: 100 } }])

      expect(graph.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([
        [0, "GET /v23.0/123?fields=id%2Cname HTTP/1.1"],
        [0, "POST /v23.0/123/messages HTTP/1.1"],
        [0, "DELETE /v23.0/media/9 HTTP/1.1"]
      ])
      const post = graph.requests[1]
      const body = JSON.stringify({ to: "15551234567", text: { body: "hé" } })
      expect(post?.body).toBe(body)
      expect(post?.head.split("\r\n").slice(1)).toEqual([
        `host: 127.0.0.1:${graph.port}`,
        "authorization: Bearer token-1",
        "content-type: application/json",
        `content-length: ${Buffer.byteLength(body)}`
      ])
    }))

  it.scoped("a message send whose kept connection closes before the answer fails and is not sent again; a read is", () =>
    Effect.gen(function*() {
      // The second request on each connection finds it closed, as when the server's idle timeout races it.
      const counts = new Map<number, number>()
      const graph = yield* rawReceiver((request) => {
        const n = (counts.get(request.connection) ?? 0) + 1
        counts.set(request.connection, n)
        return n === 2 ? "close" : json(200, { ok: true })
      })
      const client = yield* pooledClient()
      const base = `http://127.0.0.1:${graph.port}/v23.0`
      yield* client.execute(HttpClientRequest.get(`${base}/warm`))
      const send = yield* Effect.either(client.execute(HttpClientRequest.post(`${base}/123/messages`).pipe(HttpClientRequest.bodyUnsafeJson({ to: "1" }))))
      expect(Either.isLeft(send) ? send.left._tag : "answered").toBe("RequestError")
      expect(graph.requests.filter((r) => r.head.startsWith("POST")).length).toBe(1)

      yield* client.execute(HttpClientRequest.get(`${base}/warm-again`))
      const read = yield* client.execute(HttpClientRequest.get(`${base}/again`))
      expect(yield* read.json).toEqual({ ok: true })
      expect(graph.requests.map((r) => [r.connection, r.head.split(" ")[1]])).toEqual([
        [0, "/v23.0/warm"],
        [0, "/v23.0/123/messages"],
        [1, "/v23.0/warm-again"],
        [1, "/v23.0/again"],
        [2, "/v23.0/again"]
      ])
    }))

  it.scoped("the deadline still ends a call the server never answers", () =>
    Effect.gen(function*() {
      const graph = yield* rawReceiver(() => "hang")
      const client = yield* pooledClient(Duration.millis(50))
      const call = yield* Effect.either(HttpClient.get(`http://127.0.0.1:${graph.port}/v23.0/slow`).pipe(Effect.provideService(HttpClient.HttpClient, client)))
      expect(Either.isLeft(call) && isTimeout(call.left)).toBe(true)
    }))

  it.scoped("a HEAD answer ends with its head, whatever length it announces, and the connection carries the next call", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 200 OK\r\ncontent-type: image/jpeg\r\ncontent-length: 48213\r\n\r\n" },
        json(200, { id: "2" })
      ]
      const graph = yield* rawReceiver((_request, index) => replies[index] ?? json(200, {}))
      const client = yield* pooledClient()
      const base = `http://127.0.0.1:${graph.port}/v23.0`
      const head = yield* client.execute(HttpClientRequest.head(`${base}/media/1`))
      expect([head.status, head.headers["content-length"], yield* head.text]).toEqual([200, "48213", ""])
      expect(yield* Effect.flatMap(client.execute(HttpClientRequest.get(`${base}/2`)), (r) => r.json)).toEqual({ id: "2" })
      expect(graph.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([
        [0, "HEAD /v23.0/media/1 HTTP/1.1"],
        [0, "GET /v23.0/2 HTTP/1.1"]
      ])
    }))

  it.scoped("a header that would break the request is refused before a byte is written, over the pool or fetch", () =>
    Effect.gen(function*() {
      const graph = yield* rawReceiver(() => json(200, {}))
      for (const client of [yield* pooledClient(), makeFetchClient({ timeout: Duration.seconds(5) })]) {
        const call = yield* Effect.either(client.execute(HttpClientRequest.get(`http://127.0.0.1:${graph.port}/v23.0/1`).pipe(
          HttpClientRequest.bearerToken("token\r\nx-injected: 1")
        )))
        expect(Either.isLeft(call) && [call.left._tag, call.left.reason, call.left.cause instanceof Error ? call.left.cause.message : undefined]).toEqual([
          "RequestError",
          "Encode",
          "the header \"authorization\" cannot be sent"
        ])
      }
      expect([graph.connections(), graph.bytesReceived()]).toEqual([0, 0])
    }))

  it.scoped("at most maxPerOrigin connections to the Graph API: the other calls wait for one", () =>
    Effect.gen(function*() {
      const graph = yield* rawReceiver(() => json(200, { ok: true }))
      const client = yield* pooledClient(Duration.seconds(5), 2)
      const base = `http://127.0.0.1:${graph.port}/v23.0`
      const answers = yield* Effect.all(
        Array.from({ length: 12 }, (_, i) => Effect.flatMap(client.execute(HttpClientRequest.get(`${base}/${i}`)), (r) => r.json)),
        { concurrency: "unbounded" }
      )
      expect(answers).toEqual(Array.from({ length: 12 }, () => ({ ok: true })))
      expect([graph.connections(), graph.peakConnections(), graph.requests.length]).toEqual([2, 2, 12])
    }))

  it.scoped("the Graph upstream's pool takes its cap from HUB_MAX_CONNECTIONS_PER_ORIGIN", () =>
    Effect.gen(function*() {
      // The API never answers: each send holds its connection until its deadline, so uncapped sends would each open one.
      const graph = yield* rawReceiver(() => "hang")
      const settings = hubConfigWith({ upstream: "graph", graphUrl: `http://127.0.0.1:${graph.port}/v23.0`, graphTimeout: Duration.millis(300), maxConnectionsPerOrigin: 1 })
      const upstream = yield* Effect.provide(Upstream, Layer.provide(GraphUpstream, settings))
      const target = { phoneNumberId: "1", wabaId: "2", accessToken: Redacted.make("token") }
      const sends = yield* Effect.all(Array.from({ length: 3 }, () => Effect.promise(() => upstream.sendMessage(target, { to: "1" }))), { concurrency: "unbounded" })
      expect(sends.map((sent) => Either.isLeft(sent) && sent.left.kind)).toEqual(["timeout", "timeout", "timeout"])
      expect(graph.peakConnections()).toBe(1)
    }))

  it.effect("HUB_MAX_CONNECTIONS_PER_ORIGIN is 256 unless set, and must be a whole number of at least 1", () =>
    Effect.gen(function*() {
      const read = (value: string | undefined) =>
        Effect.either(Effect.withConfigProvider(hubSettings, ConfigProvider.fromMap(new Map(value === undefined ? [] : [["HUB_MAX_CONNECTIONS_PER_ORIGIN", value]]))))
      const setting = (value: string | undefined) => Effect.map(read(value), Either.map((settings) => settings.maxConnectionsPerOrigin))
      expect(yield* setting(undefined)).toEqual(Either.right(256))
      expect(yield* setting("8")).toEqual(Either.right(8))
      for (const bad of ["0", "-3", "many", "1.5"]) {
        const refused = yield* read(bad)
        expect(Either.isLeft(refused) && String(refused.left)).toContain("HUB_MAX_CONNECTIONS_PER_ORIGIN")
      }
    }))

  it("stays on fetch when a proxy is configured, since the pool connects directly", () => {
    expect(usesProxy({})).toBe(false)
    expect(usesProxy({ HTTPS_PROXY: "" })).toBe(false)
    expect(usesProxy({ https_proxy: "http://proxy:3128" })).toBe(true)
    expect(usesProxy({ HTTP_PROXY: "http://proxy:3128" })).toBe(true)
  })
})

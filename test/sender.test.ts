/**
 * Webhook POSTs over pooled keep-alive connections (src/Delivery/Sender.ts), against raw TCP and TLS
 * receivers that count their connections and can misbehave on purpose: close a kept connection as
 * the request arrives, hang, answer chunked or with `connection: close`, or present a certificate
 * for another name (then no byte of the request may reach them).
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { makeSender, NoAnswer, type Sender } from "../src/Delivery/Sender.js"
import { Deadline } from "../src/Net/Deadline.js"
import type { PoolOptions, PoolTimers } from "../src/Net/Pool.js"
import { OK, type RawReceiver, rawReceiver, type Reply } from "./support/RawReceiver.js"

const makeTestSender = (options: Partial<PoolOptions> = {}) =>
  Effect.acquireRelease(
    Effect.sync(() => makeSender({ maxIdlePerOrigin: 256, maxPerOrigin: 256, ...options })),
    (sender) => Effect.sync(() => sender.close())
  )

interface PostOptions {
  readonly serverName?: string
  readonly body?: string
  readonly headers?: Record<string, string>
  /** Ends the attempt (as its timeout or the shutdown would). */
  readonly signal?: AbortSignal
}

/**
 * One attempt, bounded by a 10 s deadline as a safety net only: the tests end attempts by events,
 * never by time. It reaches the pool at once (a request at the cap is waiting when this returns).
 */
const send = (sender: Sender, url: string, options: PostOptions = {}) => {
  const deadline = new Deadline(10_000, options.signal)
  return sender.send({
    target: { url, hostHeader: options.serverName ?? "hooks.test", serverName: options.serverName },
    headers: options.headers ?? { "content-type": "application/json", "webhook-id": "msg_1" },
    body: options.body ?? "{\"hello\":\"wörld\"}",
    timeoutMs: 10_000,
    signal: deadline.signal
  }).finally(() => deadline.settle())
}

const post = (sender: Sender, url: string, options: PostOptions = {}) =>
  Effect.promise(() => send(sender, url, options))

/** Waits (on the receiver's close events, within a safety deadline) until it has seen `n` connections close. */
const untilClosed = (receiver: RawReceiver, n: number) =>
  Effect.promise(() => receiver.whenClosed(n)).pipe(
    Effect.timeoutFail({
      duration: Duration.seconds(10),
      onTimeout: () => new Error(`${n} connections were not closed`)
    }),
    Effect.orDie
  )

/** The idle sweep's clock and timer, moved by hand: `advance` moves the clock, then runs the sweep. */
const manualTimers = () => {
  let now = 0
  const ticks = new Set<() => void>()
  const timers: PoolTimers = {
    now: () => now,
    every: (_ms, tick) => {
      ticks.add(tick)
      return () => ticks.delete(tick)
    }
  }
  return {
    timers,
    advance: (ms: number) => {
      now += ms
      for (const tick of [...ticks]) tick()
    },
    /** Whether the sweep is scheduled (it runs only while some connection is idle). */
    sweeping: () => ticks.size > 0
  }
}

describe("Sender", () => {
  it.scoped("sends the exact request and keeps connections alive, one per attempt in flight", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/hooks/in?x=1`
      expect(yield* post(sender, url)).toEqual({ status: 200, retryAfter: null, snippet: "ok" })
      const [first] = receiver.requests
      expect(first?.head.split("\r\n")).toEqual([
        "POST /hooks/in?x=1 HTTP/1.1",
        "host: hooks.test",
        "content-type: application/json",
        "webhook-id: msg_1",
        `content-length: ${Buffer.byteLength("{\"hello\":\"wörld\"}")}`
      ])
      expect(first?.body).toBe("{\"hello\":\"wörld\"}")
      for (let i = 0; i < 20; i++) yield* post(sender, url)
      expect(receiver.connections()).toBe(1)
      // 100 at once need 100 connections; the next 100 find them all kept (Bun's fetch keeps 64 in all).
      yield* Effect.all(Array.from({ length: 100 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(100)
      yield* Effect.all(Array.from({ length: 100 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(100)
      expect(receiver.requests.length).toBe(221)
    }))

  it.scoped("the Host is the webhook's name while the connection goes to the checked address; a header that cannot be sent is refused unsent", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/in`
      // A caller's own Host, Content-Length, Connection or Transfer-Encoding never reaches the wire.
      const own = {
        "content-type": "application/json",
        Host: "evil.test",
        "Content-Length": "1",
        connection: "close",
        "transfer-encoding": "chunked"
      }
      expect(yield* post(sender, url, { serverName: "hooks.example", headers: own })).toMatchObject({ status: 200 })
      expect(receiver.requests[0]?.head.split("\r\n").slice(1)).toEqual([
        "host: hooks.example",
        "content-type: application/json",
        `content-length: ${Buffer.byteLength("{\"hello\":\"wörld\"}")}`
      ])
      const before = receiver.bytesReceived()
      const refusals = [
        [{ "webhook-id": "msg_1\r\nx-injected: 1" }, "the header \"webhook-id\" cannot be sent"],
        [{ "webhook-id": "msg\n1" }, "the header \"webhook-id\" cannot be sent"],
        [{ "webhook-id": "msg\u00001" }, "the header \"webhook-id\" cannot be sent"],
        [{ "webhook-id": "msg_\u20ac" }, "the header \"webhook-id\" cannot be sent"],
        [{ "webhook id": "1" }, "the header \"webhook id\" cannot be sent"],
        [{ "webhook-id ": "1" }, "the header \"webhook-id \" cannot be sent"],
        [{ "x:y": "1" }, "the header \"x:y\" cannot be sent"]
      ] as const
      for (const [headers, message] of refusals) {
        const refused = yield* post(sender, url, { headers })
        expect(refused instanceof NoAnswer ? refused.message : refused).toBe(message)
      }
      const badHost = yield* post(sender, url, { serverName: "hooks.test\r\nx: 1" })
      expect(badHost instanceof NoAnswer ? badHost.message : badHost).toBe(
        "the host \"hooks.test\\r\\nx: 1\" cannot be sent"
      )
      expect(receiver.bytesReceived()).toBe(before)
      expect(receiver.requests.length).toBe(1)
    }))

  it.scoped("a kept connection the receiver closes as the request arrives is replaced, and the request sent again", () =>
    Effect.gen(function*() {
      // The second request on a connection finds it closed (a receiver's keep-alive timeout racing the request).
      const counts = new Map<number, number>()
      const requestsOn = (connection: number) => {
        counts.set(connection, (counts.get(connection) ?? 0) + 1)
        return counts.get(connection) ?? 0
      }
      const receiver = yield* rawReceiver((request) => (requestsOn(request.connection) === 2 ? "close" : { bytes: OK }))
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/`
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 1])
    }))

  it.scoped("a new connection closed before the answer is a failed attempt, not sent twice", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => "close")
      const sender = yield* makeTestSender()
      const answer = yield* post(sender, `http://127.0.0.1:${receiver.port}/`)
      expect(answer).toBeInstanceOf(NoAnswer)
      expect(answer instanceof NoAnswer ? answer.message : "").toMatch(/^could not be reached: /)
      expect(receiver.requests.length).toBe(1)
    }))

  it.scoped("an answer cut short, malformed or anomalous fails or ends the attempt, and its connection is not kept", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close: true },
        { bytes: "NOT HTTP\r\n\r\n" },
        { bytes: "HTTP/1.1 200 OK\r\ncontent-length : 2\r\n\r\nok" },
        // Read, but no sound server sends it: the connection is closed all the same.
        { bytes: "HTTP/1.1 204 No Content\r\ncontent-length: 2\r\n\r\n" },
        { bytes: OK }
      ]
      const receiver = yield* rawReceiver((_request, index) => replies[index] ?? { bytes: OK })
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/`
      const cut = yield* post(sender, url)
      expect(cut instanceof NoAnswer ? cut.message : cut).toBe(
        "could not be reached: the receiver closed the connection before its answer was complete"
      )
      const garbled = yield* post(sender, url)
      expect(garbled instanceof NoAnswer ? garbled.message : garbled).toBe(
        "the receiver's answer is malformed: the answer is not HTTP/1.x"
      )
      const spaced = yield* post(sender, url)
      expect(spaced instanceof NoAnswer ? spaced.message : spaced).toBe(
        "the receiver's answer is malformed: the answer has a malformed header line"
      )
      expect(yield* post(sender, url)).toEqual({ status: 204, retryAfter: null, snippet: "" })
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 1, 2, 3, 4])
      yield* untilClosed(receiver, 4)
    }))

  it.scoped("chunked answers keep the connection; `connection: close` and an abort do not", () =>
    Effect.gen(function*() {
      const abort = new AbortController()
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 503 Busy\r\ntransfer-encoding: chunked\r\nretry-after: 30\r\n\r\n5\r\nlater\r\n0\r\n\r\n" },
        { bytes: "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n" },
        "hang",
        { bytes: OK }
      ]
      const receiver = yield* rawReceiver((_request, index) => {
        // The hung request ends when the receiver has it, as its deadline would end it later.
        if (index === 2) queueMicrotask(() => abort.abort())
        return replies[index] ?? { bytes: OK }
      })
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/`
      expect(yield* post(sender, url)).toEqual({ status: 503, retryAfter: "30", snippet: "later" })
      expect(yield* post(sender, url)).toEqual({ status: 200, retryAfter: null, snippet: "" })
      const hung = yield* post(sender, url, { signal: abort.signal })
      expect(hung instanceof NoAnswer ? hung.message : hung).toBe("no answer within 10000 ms")
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      // The close-answer's connection and the hung one were not used again.
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 1, 2])
    }))

  it.scoped("keeps at most maxIdlePerOrigin idle connections, and closes each once idle for idleMs", () =>
    Effect.gen(function*() {
      const clock = manualTimers()
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* makeTestSender({ maxIdlePerOrigin: 2, idleMs: 1000, timers: clock.timers })
      const url = `http://127.0.0.1:${receiver.port}/`
      yield* Effect.all(Array.from({ length: 5 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(5)
      yield* untilClosed(receiver, 3)
      yield* Effect.all(Array.from({ length: 5 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(8)
      yield* untilClosed(receiver, 6)

      // Both kept connections went idle at 0. At 999 ms neither has expired: the next attempt takes one.
      clock.advance(999)
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.connections()).toBe(8)
      // At 1000 ms the one left idle since 0 closes; the one used at 999 ms closes at 1999 ms, not before.
      clock.advance(1)
      yield* untilClosed(receiver, 7)
      clock.advance(998)
      expect(receiver.closedConnections()).toBe(7)
      expect(clock.sweeping()).toBe(true)
      clock.advance(1)
      yield* untilClosed(receiver, 8)
      // Nothing idle: the sweep stops, and the next attempt opens a new connection.
      expect(clock.sweeping()).toBe(false)
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.connections()).toBe(9)
    }))

  it.scoped("an idle connection is used again until idleMs has passed, and closed after", () =>
    Effect.gen(function*() {
      const clock = manualTimers()
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* makeTestSender({ maxIdlePerOrigin: 2, idleMs: 600, timers: clock.timers })
      const url = `http://127.0.0.1:${receiver.port}/`
      for (let i = 0; i < 3; i++) {
        expect(yield* post(sender, url)).toMatchObject({ status: 200 })
        clock.advance(599)
      }
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 0])
      clock.advance(1)
      yield* untilClosed(receiver, 1)
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 0, 1])
    }))

  it.scoped("at most maxPerOrigin connections to one origin: the others wait their turn, in order", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const one = yield* makeTestSender({ maxPerOrigin: 1 })
      const url = `http://127.0.0.1:${receiver.port}/`
      yield* Effect.promise(() =>
        Promise.all(Array.from({ length: 10 }, (_, i) => send(one, url, { body: String(i) })))
      )
      expect(receiver.requests.map((r) => [r.connection, r.body])).toEqual(
        Array.from({ length: 10 }, (_, i) => [0, String(i)])
      )

      const other = yield* rawReceiver(() => ({ bytes: OK }))
      const three = yield* makeTestSender({ maxPerOrigin: 3 })
      const answers = yield* Effect.all(
        Array.from({ length: 40 }, () => post(three, `http://127.0.0.1:${other.port}/`)),
        { concurrency: "unbounded" }
      )
      expect(answers.every((answer) => !(answer instanceof NoAnswer) && answer.status === 200)).toBe(true)
      expect([other.connections(), other.peakConnections(), other.requests.length]).toEqual([3, 3, 40])
    }))

  it.scoped("a request waiting at the cap gives up on its own signal, and a closed connection's place goes to the next", () =>
    Effect.gen(function*() {
      const first = new AbortController()
      const receiver = yield* rawReceiver((_request, index) => (index === 0 ? "hang" : { bytes: OK }))
      const sender = yield* makeTestSender({ maxPerOrigin: 1 })
      const url = `http://127.0.0.1:${receiver.port}/`
      const hung = send(sender, url, { body: "first", signal: first.signal })
      yield* Effect.promise(() => receiver.whenRequests(1))
      // The cap is reached: these two wait; the first of them gives up when its signal aborts, unsent.
      const waiting = new AbortController()
      const second = send(sender, url, { body: "second", signal: waiting.signal })
      const third = send(sender, url, { body: "third" })
      waiting.abort()
      const gaveUp = yield* Effect.promise(() => second)
      expect(gaveUp instanceof NoAnswer ? gaveUp.message : gaveUp).toBe("no answer within 10000 ms")
      // The hung attempt ends; its connection closes and its place goes to the third, on a new connection.
      first.abort()
      expect(yield* Effect.promise(() => hung)).toBeInstanceOf(NoAnswer)
      expect(yield* Effect.promise(() => third)).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => [r.connection, r.body])).toEqual([[0, "first"], [1, "third"]])
      expect(receiver.peakConnections()).toBe(1)
    }))

  it.scoped("a refused connection is a failed attempt", () =>
    Effect.gen(function*() {
      const closed = yield* rawReceiver(() => ({ bytes: OK }))
      const port = closed.port
      const sender = yield* makeTestSender()
      // A port nobody listens on: take one, then free it.
      const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: () => undefined } })
      const freePort = probe.port
      probe.stop(true)
      const answer = yield* post(sender, `http://127.0.0.1:${freePort}/`)
      expect(answer instanceof NoAnswer ? answer.message : answer).toMatch(/^could not be reached: /)
      expect(yield* post(sender, `http://127.0.0.1:${port}/`)).toMatchObject({ status: 200 })
    }))
})

/** A test CA and a certificate it issued for hooks.test, made with the openssl command line. */
const testCertificates = Effect.acquireRelease(
  Effect.sync(() => {
    const folder = mkdtempSync(join(tmpdir(), "hub-tls-"))
    const run = (...args: Array<string>) => {
      const result = Bun.spawnSync(["openssl", ...args], { cwd: folder })
      if (result.exitCode !== 0) throw new Error(`openssl ${args[0]}: ${result.stderr.toString()}`)
    }
    const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
      "req",
      "-x509",
      ...ec,
      "-keyout",
      "ca.key",
      "-out",
      "ca.pem",
      "-days",
      "2",
      "-subj",
      "/CN=Hub Test CA",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign"
    )
    run("req", ...ec, "-keyout", "hooks.key", "-out", "hooks.csr", "-subj", "/CN=hooks.test")
    writeFileSync(join(folder, "ext.cnf"), "subjectAltName=DNS:hooks.test\nbasicConstraints=CA:FALSE\n")
    run(
      "x509",
      "-req",
      "-in",
      "hooks.csr",
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      "hooks.pem",
      "-days",
      "2",
      "-extfile",
      "ext.cnf"
    )
    const read = (name: string) => readFileSync(join(folder, name), "utf8")
    return { folder, ca: read("ca.pem"), key: read("hooks.key"), cert: read("hooks.pem") }
  }),
  ({ folder }) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
)

describe("Sender over TLS", () => {
  it.scoped("verifies the chain and the name before sending, and keeps the connection", () =>
    Effect.gen(function*() {
      const certificates = yield* testCertificates
      const receiver = yield* rawReceiver(() => ({ bytes: OK }), { key: certificates.key, cert: certificates.cert })
      const url = `https://127.0.0.1:${receiver.port}/secure`
      const trusting = yield* makeTestSender({ ca: certificates.ca })
      expect(yield* post(trusting, url, { serverName: "hooks.test" })).toEqual({
        status: 200,
        retryAfter: null,
        snippet: "ok"
      })
      expect(yield* post(trusting, url, { serverName: "hooks.test" })).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([[
        0,
        "POST /secure HTTP/1.1"
      ], [0, "POST /secure HTTP/1.1"]])
      const before = receiver.bytesReceived()

      // A certificate for another name, or from a CA not trusted: refused, and not one byte of the request sent.
      const otherName = yield* post(trusting, url, { serverName: "other.test" })
      expect(otherName instanceof NoAnswer ? otherName.message : otherName).toMatch(
        /^could not be reached: .*other\.test/
      )
      const untrusting = yield* makeTestSender()
      const untrusted = yield* post(untrusting, url, { serverName: "hooks.test" })
      expect(untrusted instanceof NoAnswer ? untrusted.message : untrusted).toMatch(/^could not be reached: /)
      expect(receiver.requests.length).toBe(2)
      expect(receiver.bytesReceived()).toBe(before)
    }))
})

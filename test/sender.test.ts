/**
 * Webhook POSTs over pooled keep-alive connections (src/Delivery/Sender.ts), against raw TCP and TLS
 * receivers that count their connections and can misbehave on purpose: close a kept connection as
 * the request arrives, hang, answer chunked or with `connection: close`, or present a certificate
 * for another name (then no byte of the request may reach them).
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { makeSender, NoAnswer, type Sender } from "../src/Delivery/Sender.js"
import { OK, type RawReceiver, rawReceiver, type Reply } from "./support/RawReceiver.js"

const makeTestSender = (ca?: string) =>
  Effect.acquireRelease(Effect.sync(() => makeSender({ maxIdlePerOrigin: 256, ...(ca === undefined ? {} : { ca }) })), (sender) => Effect.sync(() => sender.close()))

const post = (sender: Sender, url: string, options: { readonly timeoutMs?: number; readonly serverName?: string; readonly body?: string } = {}) =>
  Effect.promise(() => {
    const timeoutMs = options.timeoutMs ?? 5_000
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(), timeoutMs)
    return sender.send({
      target: { url, hostHeader: options.serverName ?? "hooks.test", serverName: options.serverName },
      headers: { "content-type": "application/json", "webhook-id": "msg_1" },
      body: options.body ?? "{\"hello\":\"wörld\"}",
      timeoutMs,
      signal: controller.signal
    }).finally(() => clearTimeout(timer))
  })

/** Waits, within a deadline, until the receiver has seen `n` connections close. */
const untilClosed = (receiver: RawReceiver, n: number) =>
  Effect.sync(() => receiver.closedConnections()).pipe(
    Effect.filterOrFail((closed) => closed === n, () => "not yet"),
    Effect.retry(Schedule.spaced(Duration.millis(20))),
    Effect.timeoutFail({ duration: Duration.seconds(15), onTimeout: () => new Error(`${n} connections were not closed`) }),
    Effect.orDie
  )

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
        "content-type: application/json",
        "webhook-id: msg_1",
        "host: hooks.test",
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

  it.scoped("a kept connection the receiver closes as the request arrives is replaced, and the request sent again", () =>
    Effect.gen(function*() {
      // The second request on a connection finds it closed (a receiver's keep-alive timeout racing the request).
      const receiver = yield* rawReceiver((request) => (receiver_requestsOn(request.connection) === 2 ? "close" : { bytes: OK }))
      const counts = new Map<number, number>()
      const receiver_requestsOn = (connection: number) => {
        counts.set(connection, (counts.get(connection) ?? 0) + 1)
        return counts.get(connection) ?? 0
      }
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

  it.scoped("an answer cut short or malformed fails the attempt and its connection is not kept", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc", close: true },
        { bytes: "NOT HTTP\r\n\r\n" },
        { bytes: OK }
      ]
      const receiver = yield* rawReceiver((_request, index) => replies[index] ?? { bytes: OK })
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/`
      const cut = yield* post(sender, url)
      expect(cut instanceof NoAnswer ? cut.message : cut).toBe("could not be reached: the receiver closed the connection before its answer was complete")
      const garbled = yield* post(sender, url)
      expect(garbled instanceof NoAnswer ? garbled.message : garbled).toBe("the receiver's answer is malformed: the answer is not HTTP/1.x")
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 1, 2])
    }))

  it.scoped("chunked answers keep the connection; `connection: close` and a timeout do not", () =>
    Effect.gen(function*() {
      const replies: Array<Reply> = [
        { bytes: "HTTP/1.1 503 Busy\r\ntransfer-encoding: chunked\r\nretry-after: 30\r\n\r\n5\r\nlater\r\n0\r\n\r\n" },
        { bytes: "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n" },
        "hang",
        { bytes: OK }
      ]
      const receiver = yield* rawReceiver((_request, index) => replies[index] ?? { bytes: OK })
      const sender = yield* makeTestSender()
      const url = `http://127.0.0.1:${receiver.port}/`
      expect(yield* post(sender, url)).toEqual({ status: 503, retryAfter: "30", snippet: "later" })
      expect(yield* post(sender, url)).toEqual({ status: 200, retryAfter: null, snippet: "" })
      const hung = yield* post(sender, url, { timeoutMs: 50 })
      expect(hung instanceof NoAnswer ? hung.message : hung).toBe("no answer within 50 ms")
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      // The close-answer's connection and the hung one were not used again.
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 1, 2])
    }))

  it.scopedLive("keeps at most maxIdlePerOrigin idle connections, and closes idle ones after idleMs", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* Effect.acquireRelease(Effect.sync(() => makeSender({ maxIdlePerOrigin: 2, idleMs: 1000 })), (s) => Effect.sync(() => s.close()))
      const url = `http://127.0.0.1:${receiver.port}/`
      yield* Effect.all(Array.from({ length: 5 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(5)
      yield* untilClosed(receiver, 3)
      yield* Effect.all(Array.from({ length: 5 }, () => post(sender, url)), { concurrency: "unbounded" })
      expect(receiver.connections()).toBe(8)
      // The two kept connections are closed once idle (Bun checks socket timeouts every few seconds).
      yield* untilClosed(receiver, 8)
      expect(yield* post(sender, url)).toMatchObject({ status: 200 })
      expect(receiver.connections()).toBe(9)
    }))

  it.scopedLive("an idle connection is used again until idleMs has passed, and closed after", () =>
    Effect.gen(function*() {
      const receiver = yield* rawReceiver(() => ({ bytes: OK }))
      const sender = yield* Effect.acquireRelease(Effect.sync(() => makeSender({ maxIdlePerOrigin: 2, idleMs: 600 })), (s) => Effect.sync(() => s.close()))
      const url = `http://127.0.0.1:${receiver.port}/`
      for (let i = 0; i < 3; i++) {
        expect(yield* post(sender, url)).toMatchObject({ status: 200 })
        // Idle for a third of its time: Bun's own socket timeout could close it at any moment of that.
        yield* Effect.sleep(Duration.millis(200))
      }
      const lastUsed = Date.now()
      expect(receiver.requests.map((r) => r.connection)).toEqual([0, 0, 0])
      yield* untilClosed(receiver, 1)
      expect(Date.now() - lastUsed).toBeGreaterThanOrEqual(600 - 200)
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
    run("req", "-x509", ...ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Hub Test CA",
      "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    run("req", ...ec, "-keyout", "hooks.key", "-out", "hooks.csr", "-subj", "/CN=hooks.test")
    writeFileSync(join(folder, "ext.cnf"), "subjectAltName=DNS:hooks.test\nbasicConstraints=CA:FALSE\n")
    run("x509", "-req", "-in", "hooks.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "hooks.pem", "-days", "2", "-extfile", "ext.cnf")
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
      const trusting = yield* makeTestSender(certificates.ca)
      expect(yield* post(trusting, url, { serverName: "hooks.test" })).toEqual({ status: 200, retryAfter: null, snippet: "ok" })
      expect(yield* post(trusting, url, { serverName: "hooks.test" })).toMatchObject({ status: 200 })
      expect(receiver.requests.map((r) => [r.connection, r.head.split("\r\n")[0]])).toEqual([[0, "POST /secure HTTP/1.1"], [0, "POST /secure HTTP/1.1"]])
      const before = receiver.bytesReceived()

      // A certificate for another name, or from a CA not trusted: refused, and not one byte of the request sent.
      const otherName = yield* post(trusting, url, { serverName: "other.test" })
      expect(otherName instanceof NoAnswer ? otherName.message : otherName).toMatch(/^could not be reached: .*other\.test/)
      const untrusting = yield* makeTestSender()
      const untrusted = yield* post(untrusting, url, { serverName: "hooks.test" })
      expect(untrusted instanceof NoAnswer ? untrusted.message : untrusted).toMatch(/^could not be reached: /)
      expect(receiver.requests.length).toBe(2)
      expect(receiver.bytesReceived()).toBe(before)
    }))
})

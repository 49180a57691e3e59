/**
 * Bodies are bounded while they are read: a declared length over the route's limit is refused before
 * the body is read, a chunked body is refused at the first bytes past it, the answer is a 413 that
 * closes the connection, and the rest of the body is never buffered (checked on the hub's own memory).
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { residentBytes, startHubProcess } from "./support/HubProcess.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"

const MB = 1024 * 1024

interface RawAnswer {
  /** The status line and headers as received. */
  readonly head: string
  readonly body: string
  /** Body bytes the client had written when the answer arrived. */
  readonly sentBeforeAnswer: number
  /** The server closed the connection (the client never stopped sending first). */
  readonly closedByServer: boolean
}

/**
 * POSTs a body of `total` bytes, chunked (no Content-Length), in 64 KB pieces as fast as the socket
 * takes them, over a raw connection, and stops sending when the answer arrives or the server closes.
 */
const chunkedPost = (base: string, path: string, total: number, headers: Record<string, string> = {}) =>
  new Promise<RawAnswer>((resolve, reject) => {
    const url = new URL(base)
    const piece = new Uint8Array(64 * 1024).fill(0x20)
    const framed = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from("\r\n")])
    let received = ""
    let sent = 0
    let sentBeforeAnswer = -1
    let closed = false
    const extra = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join("")
    /** What the socket has not taken yet of the piece being written. */
    let unwritten: Uint8Array | undefined
    const pump = (socket: { write: (data: Uint8Array | string) => number }) => {
      while (!closed && sentBeforeAnswer < 0) {
        if (unwritten === undefined) {
          if (sent >= total) {
            socket.write("0\r\n\r\n")
            return
          }
          unwritten = framed
          sent += piece.length
        }
        const written = socket.write(unwritten)
        unwritten = written >= unwritten.length ? undefined : unwritten.subarray(Math.max(0, written))
        if (unwritten !== undefined) return
      }
    }
    Bun.connect({
      hostname: url.hostname,
      port: Number(url.port),
      socket: {
        open: (socket) => {
          socket.write(
            `POST ${path} HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\n${extra}transfer-encoding: chunked\r\n\r\n`
          )
          pump(socket)
        },
        drain: (socket) => pump(socket),
        data: (_socket, data) => {
          if (sentBeforeAnswer < 0) sentBeforeAnswer = sent
          received += data.toString()
        },
        close: () => {
          closed = true
          const split = received.indexOf("\r\n\r\n")
          resolve({
            head: received.slice(0, split),
            body: received.slice(split + 4),
            sentBeforeAnswer,
            closedByServer: sent < total
          })
        },
        error: (_socket, error) => reject(error)
      }
    }).catch(reject)
  })

layer(testHub(), { excludeTestServices: true })("route limits, through the real server", (it) => {
  it.effect("a chunked upstream post past 8 MiB is answered 413 while the client still sends, and the connection closes", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const answer = yield* Effect.promise(() => chunkedPost(hub.baseUrl, "/upstream/events", 60 * MB))
      expect(answer.head).toMatch(/^HTTP\/1\.1 413/)
      expect(answer.head.toLowerCase()).toContain("connection: close")
      expect(JSON.parse(answer.body)).toEqual({
        statusCode: 413,
        message: "The event payload is larger than 8 MB",
        error: "payload_too_large"
      })
      // Answered long before the 60 MB were sent: reading stopped at the limit.
      expect(answer.sentBeforeAnswer).toBeLessThan(30 * MB)
      expect(answer.closedByServer).toBe(true)
    }))

  it.effect("JSON API routes take 1 MiB: past it, declared or streamed, on HttpApi's routes and on the fast lane's send", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const refusal = { statusCode: 413, message: "The request body is larger than 1 MB", error: "payload_too_large" }
      for (const path of ["/api/webhooks", "/api/messages", "/templates"]) {
        const streamed = yield* Effect.promise(() =>
          chunkedPost(hub.baseUrl, path, 4 * MB, { authorization: `Bearer ${tenant.instanceToken}` })
        )
        expect(streamed.head, path).toMatch(/^HTTP\/1\.1 413/)
        expect(streamed.head.toLowerCase(), path).toContain("connection: close")
        expect(JSON.parse(streamed.body), path).toEqual(refusal)
        const declared = yield* hub.request("POST", path, {
          token: tenant.instanceToken,
          body: JSON.stringify({ name: "x".repeat(MB + 10) }),
          headers: { "content-type": "application/json" }
        })
        expect(declared.status, path).toBe(413)
        expect(declared.body, path).toEqual(refusal)
      }
      // Just under the limit is read and judged on its content.
      const fits = yield* hub.request("POST", "/api/webhooks", {
        token: tenant.instanceToken,
        json: { url: "https://example.com/hook", name: "n".repeat(MB - 100) }
      })
      expect(fits.status).toBe(400)
      expect(fits.body).toMatchObject({ error: "validation_failed", details: [{ field: "name" }] })
    }))
})

describe("the hub's memory under oversized posts", () => {
  it.scoped(
    "eight parallel 60 MB chunked posts raise the hub's resident memory by less than their 8 MiB limits",
    () =>
      Effect.gen(function*() {
        const hub = yield* startHubProcess({
          HUB_DB: join(mkdtempSync(join(tmpdir(), "hub-limits-")), "hub.sqlite"),
          HUB_MEMORY_TARGET_MB: "0"
        })
        const answers = yield* Effect.promise(async () => {
          // Warm the route once, so what follows measures the bodies, not the first request's code paths.
          await chunkedPost(hub.baseUrl, "/upstream/events", 10 * MB)
          const before = await residentBytes(hub.pid)
          const all = await Promise.all(
            Array.from({ length: 8 }, () => chunkedPost(hub.baseUrl, "/upstream/events", 60 * MB))
          )
          return { all, grown: (await residentBytes(hub.pid)) - before }
        })
        expect(answers.all.map((answer) => answer.head.split("\r\n")[0])).toEqual(
          Array.from({ length: 8 }, () => "HTTP/1.1 413 Payload Too Large")
        )
        // Buffering the bodies would take 480 MB; the limits allow 64 MiB, plus room for the sockets'
        // buffers and the allocator (the runtime's own, whatever the hub does).
        expect(answers.grown, `grew ${Math.round(answers.grown / MB)} MB`).toBeLessThan(8 * 8 * MB + 32 * MB)
      }),
    60_000
  )
})

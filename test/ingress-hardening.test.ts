/**
 * What a stranger can do to POST /upstream/events before its signature is checked: the bytes all
 * unverified posts hold are bounded together (HUB_INGRESS_UNVERIFIED_MB), and past the bound a post is
 * answered 503 with Retry-After at once, its body never read; room comes back as posts finish.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { connect, type Socket } from "node:net"
import { TestHub, testHub } from "./support/TestHub.js"

const MB = 1024 * 1024

/** A post whose head and first bytes are sent, the rest held back until `finish`; its answer as text. */
const heldPost = (base: string, declared: number) =>
  Effect.async<{ readonly socket: Socket; readonly answer: Promise<string>; readonly finish: (body: string) => void }>((resume) => {
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
      socket.write(`POST /upstream/events HTTP/1.1\r\nHost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n`)
      resume(Effect.succeed({
        socket,
        answer,
        // The body so far is the first bytes of a JSON object padded with spaces to the declared length.
        finish: (body: string) => socket.write(body.padEnd(declared, " "))
      }))
    })
  })

const EMPTY_POST = JSON.stringify({ object: "whatsapp_business_account", entry: [] })

const logged: Array<{ readonly level: string; readonly message: string }> = []
const capture = Logger.make(({ logLevel, message }) => {
  logged.push({ level: logLevel.label, message: [message].flat().map(String).join(" ") })
})

layer(testHub({ ingressUnverifiedMaxBytes: 2 * MB }, Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Info))))("unverified upstream posts", (it) => {
  it.scoped("hold at most HUB_INGRESS_UNVERIFIED_MB between them; past it 503 with Retry-After before the body is read", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const first = yield* heldPost(hub.baseUrl, MB)
      const second = yield* heldPost(hub.baseUrl, MB)
      yield* Effect.addFinalizer(() => Effect.sync(() => [first, second].forEach((p) => p.socket.destroy())))
      // Both posts are being read (each holds its declared megabyte) once the hub answers a probe past the bound.
      const refused = yield* Effect.promise(async () => {
        for (;;) {
          const answer = await fetch(`${hub.baseUrl}/upstream/events`, { method: "POST", headers: { "content-type": "application/json" }, body: EMPTY_POST })
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
          const big = await fetch(`${hub.baseUrl}/upstream/events`, { method: "POST", headers: { "content-type": "application/json" }, body: EMPTY_POST.padEnd(MB + 10, " ") })
          if (big.status !== 503) return big.status
          await Bun.sleep(10)
        }
      })
      expect(again).toBe(200)
      // The abort is the poster's doing: a warning, never an error.
      expect(logged.filter((line) => line.message.startsWith("An upstream post was aborted")).map((line) => line.level)).toEqual(["WARN"])
      expect(logged.filter((line) => line.level === "ERROR")).toEqual([])
    }))
})

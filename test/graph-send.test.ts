/**
 * The Graph send as a plain promise (src/Upstream/GraphSend.ts), both ways it goes: over kept-alive
 * connections, and over fetch (as when a proxy is configured), against the fake Graph API.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Redacted } from "effect"
import { makeKeepAlivePool } from "../src/Net/Pool.js"
import { makeGraphSend } from "../src/Upstream/GraphSend.js"
import type { UpstreamTarget } from "../src/Upstream/Upstream.js"
import { FakeGraph, fakeGraphLayer } from "./support/FakeGraph.js"

const target = (accessToken = "graph-token-1"): UpstreamTarget => ({
  phoneNumberId: "106540352242922",
  wabaId: "102290129340398",
  accessToken: Redacted.make(accessToken)
})
const message = { messaging_product: "whatsapp", to: "16505551234", type: "text", text: { body: "hi" } }
const accepted = {
  messaging_product: "whatsapp",
  contacts: [{ input: "16505551234", wa_id: "16505551234" }],
  messages: [{ id: "wamid.sent" }],
  x_extra: 1
}

/** A GraphSend over a kept-alive pool (closed with the scope) or over fetch. */
const graphSend = (way: "pool" | "fetch", timeout = Duration.seconds(5)) =>
  Effect.gen(function*() {
    const fake = yield* FakeGraph
    const pool = way === "fetch"
      ? undefined
      : yield* Effect.acquireRelease(
        Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 8, maxPerOrigin: 64 })),
        (p) => Effect.sync(() => p.close())
      )
    const send = makeGraphSend({ graphUrl: fake.baseUrl, timeout, pool })
    return (to: UpstreamTarget) => Effect.promise(() => send(to, message))
  })

for (const way of ["pool", "fetch"] as const) {
  layer(fakeGraphLayer)(`the Graph send over ${way}`, (it) => {
    it.scoped("posts the message with the token and JSON headers, and answers the upstream's body unchanged", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        yield* fake.reset
        yield* fake.respond({ method: "POST", path: "/106540352242922/messages" }, { body: accepted })
        const sent = yield* Effect.flatMap(graphSend(way), (send) => send(target()))
        expect(sent).toEqual(Either.right(accepted))
        const request = yield* fake.lastRequest
        expect(request.path).toBe("/v23.0/106540352242922/messages")
        expect(request.json).toEqual(message)
        expect(request.headers).toMatchObject({
          authorization: "Bearer graph-token-1",
          "content-type": "application/json",
          accept: "application/json",
          "user-agent": "messaging-hub/0.1"
        })
      }))

    it.scoped("a refusal is the decoded Graph error with its Retry-After; an unexpected 200 body is a 502", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        yield* fake.reset
        const send = yield* graphSend(way)
        yield* fake.respond({ path: "/106540352242922/messages" }, {
          status: 429,
          headers: { "retry-after": "7" },
          body: {
            error: {
              message: "(#130429) Rate limit hit",
              code: 130429,
              error_subcode: 2494055,
              fbtrace_id: "trace-1",
              error_data: { details: "slow down" }
            }
          }
        })
        const refused = yield* send(target())
        expect(Either.isLeft(refused) && refused.left).toMatchObject({
          kind: "graph",
          status: 429,
          code: 130429,
          subcode: 2494055,
          message: "(#130429) Rate limit hit",
          fbtraceId: "trace-1",
          details: "slow down",
          retryAfterSeconds: 7
        })
        yield* fake.respond({ path: "/106540352242922/messages" }, {
          body: { messaging_product: "whatsapp", messages: [] }
        })
        const malformed = yield* send(target())
        expect(Either.isLeft(malformed) && malformed.left).toMatchObject({
          kind: "graph",
          status: 502,
          message: "The upstream answered the send with an unexpected body",
          // A 2xx: the message may have gone, so neither the queue nor the record takes it for a refusal.
          answeredOk: true
        })
      }))

    it.scoped("no answer within the deadline is a timeout, sent once; a token that would break the request is refused unsent", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        yield* fake.reset
        yield* fake.respond({ path: "/106540352242922/messages" }, { hang: true })
        const timedOut = yield* Effect.flatMap(graphSend(way, Duration.millis(50)), (send) => send(target()))
        expect(Either.isLeft(timedOut) && timedOut.left).toMatchObject({
          kind: "timeout",
          status: 0,
          message: "The upstream did not answer the send within 50ms"
        })
        expect(yield* fake.requests).toHaveLength(1)

        const broken = yield* Effect.flatMap(graphSend(way), (send) => send(target("token\r\nx-injected: 1")))
        expect(Either.isLeft(broken) && broken.left).toMatchObject({
          kind: "network",
          message: `the header "authorization" cannot be sent`
        })
        expect(yield* fake.requests).toHaveLength(1)
      }))
  })
}

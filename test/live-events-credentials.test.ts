/**
 * An event stream lives only as long as its credential: revoked in this process or in another (the
 * revocation feed, as on every replica), the stream ends; and open streams are capped per token and
 * per organization (429 beyond). Through the real HTTP server.
 */
import { expect, it as plain, layer } from "@effect/vitest"
import { Duration, Effect, Either, Fiber, Option, Stream, TestClock } from "effect"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TokensRepo } from "../src/ApiTokens/Repo.js"
import { POLL_INTERVAL, RevocationFeed } from "../src/ApiTokens/RevocationFeed.js"
import { TokenResolver } from "../src/ApiTokens/TokenResolver.js"
import { Unauthorized } from "../src/Domain/Errors.js"
import { OrganizationId } from "../src/Domain/Ids.js"
import { credentialEnds, HEARTBEAT } from "../src/LiveEvents/Http.js"
import { LiveEvents } from "../src/LiveEvents/LiveEvents.js"
import { untilAfterEachSignal } from "./support/Signals.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const main = join(import.meta.dirname, "..", "src", "main.ts")

interface OpenStream {
  readonly status: number
  /** Every event until the server ends the stream (a comment, the heartbeat, is not an event). */
  readonly untilEnd: Promise<ReadonlyArray<EventSourceMessage>>
  /** Resolves with the `ready` event. */
  readonly ready: Promise<EventSourceMessage | undefined>
  readonly close: () => void
}

const openStream = (baseUrl: string, token: string) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<OpenStream> => {
      const abort = new AbortController()
      const response = await fetch(`${baseUrl}/api/events/stream`, {
        headers: { authorization: `Bearer ${token}` },
        signal: abort.signal
      })
      const events: Array<EventSourceMessage> = []
      let readyNow: (event: EventSourceMessage | undefined) => void = () => {}
      const ready = new Promise<EventSourceMessage | undefined>((resolve) => (readyNow = resolve))
      const parser = createParser({
        onEvent: (event) => {
          events.push(event)
          if (event.event === "ready") readyNow(event)
        }
      })
      const untilEnd = (async () => {
        const reader = response.body?.getReader()
        const decoder = new TextDecoder()
        for (;;) {
          const chunk = await reader?.read().catch(() => undefined)
          if (chunk === undefined || chunk.done) break
          parser.feed(decoder.decode(chunk.value, { stream: true }))
        }
        readyNow(undefined)
        return events
      })()
      return { status: response.status, untilEnd, ready, close: () => abort.abort() }
    }),
    (stream) => Effect.sync(stream.close)
  )

const postStatus = (number: { readonly phoneNumberId: string; readonly wabaId: string }, id: string) =>
  Effect.flatMap(
    TestHub,
    (hub) =>
      hub.request("POST", "/upstream/events", {
        json: envelope([number.wabaId, [statusChange(number, status(id, "delivered", 1750263790))]])
      })
  )

const databaseFile = join(mkdtempSync(join(tmpdir(), "hub-stream-revocation-")), "hub.sqlite")

layer(testHub({ databaseFile, streamsPerToken: 2, streamsPerOrganization: 3 }), { timeout: 60_000 })(
  "event streams and their credential",
  (it) => {
    it.effect("a token revoked through the API ends its open streams at once; nothing posted after reaches them", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const created = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "streamer", instance_id: tenant.instanceId }
        })
        const token = String(created.body.token)
        const stream = yield* openStream(hub.baseUrl, token)
        expect(stream.status).toBe(200)
        expect((yield* Effect.promise(() => stream.ready))?.event).toBe("ready")
        const before = wamid()
        yield* postStatus(tenant, before)
        const revoked = yield* hub.request("DELETE", `/api/auth/api-tokens/${String(created.body.id)}`, {
          token: tenant.sessionToken
        })
        expect(revoked.status).toBe(204)
        // The stream ends by itself, without a heartbeat passing (the test clock does not move).
        const events = yield* Effect.promise(() => stream.untilEnd)
        const after = wamid()
        yield* postStatus(tenant, after)
        const text = events.map((e) => e.data).join("\n")
        expect(text).not.toContain(after)
        expect((yield* hub.request("GET", "/api/events/stream", { token })).status).toBe(401)
      }).pipe(Effect.scoped))

    it.effect("a token revoked by another process (the revocation feed, as on another replica) ends the stream at the feed's next read", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const feed = yield* RevocationFeed
        const tokens = yield* TokensRepo
        const tenant = yield* seedTenant()
        const created = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "elsewhere" }
        })
        const stream = yield* openStream(hub.baseUrl, String(created.body.token))
        expect((yield* Effect.promise(() => stream.ready))?.event).toBe("ready")
        const cli = yield* Effect.promise(async () => {
          const child = Bun.spawn([process.execPath, main, "token", "revoke", String(created.body.id)], {
            env: { ...process.env, HUB_DB: databaseFile, HUB_LOG_LEVEL: "warning" },
            stdout: "pipe",
            stderr: "pipe"
          })
          return { exitCode: await child.exited, stderr: await new Response(child.stderr).text() }
        })
        expect(cli).toEqual({ exitCode: 0, stderr: "" })
        const revocation = yield* tokens.lastRevocation
        const polled = yield* Effect.fork(
          feed.position.changes.pipe(Stream.filter((seq) => seq >= revocation), Stream.runHead)
        )
        yield* TestClock.adjust(POLL_INTERVAL)
        yield* Fiber.join(polled)
        yield* Effect.promise(() => stream.untilEnd)
      }).pipe(Effect.scoped))

    it.effect("streams are capped per token and per organization: 429 with Retry-After beyond; a closed stream frees its place", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const first = yield* openStream(hub.baseUrl, tenant.instanceToken)
        yield* Effect.promise(() => first.ready)
        const second = yield* openStream(hub.baseUrl, tenant.instanceToken)
        yield* Effect.promise(() => second.ready)
        const third = yield* hub.request("GET", "/api/events/stream", { token: tenant.instanceToken })
        expect(third.status).toBe(429)
        expect(third.headers.get("retry-after")).toBe("5")
        expect(third.body).toMatchObject({
          statusCode: 429,
          error: "too_many_streams",
          message: expect.stringContaining("HUB_STREAMS_PER_TOKEN")
        })
        // The organization's third stream, through its own token, fills its share; a fourth is refused.
        const orgStream = yield* openStream(hub.baseUrl, tenant.orgToken)
        yield* Effect.promise(() => orgStream.ready)
        const fourth = yield* hub.request("GET", "/api/events/stream", { token: tenant.orgToken })
        expect(fourth.status).toBe(429)
        expect(fourth.body).toMatchObject({ message: expect.stringContaining("HUB_STREAMS_PER_ORGANIZATION") })
        // Another organization is not held back by this one.
        const other = yield* seedTenant()
        const otherStream = yield* openStream(hub.baseUrl, other.orgToken)
        expect(otherStream.status).toBe(200)
        // Closing one frees a place: the server notices the closed connection on its own time, so ask again as streams close (bounded).
        const live = yield* LiveEvents
        first.close()
        const reopen = Effect.promise(async () => {
          const answer = await fetch(`${hub.baseUrl}/api/events/stream`, {
            headers: { authorization: `Bearer ${tenant.instanceToken}` }
          })
          if (answer.status === 200) {
            await answer.body?.cancel()
            return Option.some(200)
          }
          await answer.text()
          return Option.none()
        })
        const reopened = yield* untilAfterEachSignal(
          live.streamsOpen,
          "a stream opened in the closed one's place",
          reopen
        )
        expect(reopened).toBe(200)
      }).pipe(Effect.scoped))
  }
)

plain.effect(
  "a stream's credential is checked again at every heartbeat, and ends at its expiry",
  () =>
    Effect.gen(function*() {
      let valid = true
      // A resolver that never announces a revocation: only the heartbeat can find it.
      const resolver = TokenResolver.make({
        resolve: () => (valid ? Effect.succeed(principal) : Effect.fail(new Unauthorized())),
        resolveNow: () => undefined,
        forget: () => Effect.void,
        watch: () => () => {}
      })
      const principal = {
        kind: "organization" as const,
        credentialId: "tok_1",
        organizationId: OrganizationId.make("org_1"),
        instance: undefined
      }
      const revoked = yield* Effect.fork(credentialEnds(resolver, "mhk_secret", principal))
      yield* TestClock.adjust(HEARTBEAT)
      expect(revoked.unsafePoll()).toBeNull()
      valid = false
      yield* TestClock.adjust(HEARTBEAT)
      yield* Fiber.join(revoked)
      // An expiring credential ends at its expiry, before any heartbeat finds it.
      valid = true
      const now = yield* TestClock.currentTimeMillis
      const expiring = yield* Effect.fork(
        credentialEnds(resolver, "mhs_secret", { ...principal, expiresAt: now + 1_000 }, Duration.hours(1))
      )
      yield* TestClock.adjust(Duration.millis(999))
      expect(expiring.unsafePoll()).toBeNull()
      yield* TestClock.adjust(Duration.millis(1))
      expect(Either.isRight(yield* Effect.either(Fiber.join(expiring)))).toBe(true)
    })
)

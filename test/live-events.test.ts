/**
 * GET /api/events/stream through the real HTTP server: who sees which committed changes, the
 * refusals, and the bounded buffer of a slow stream (LiveEvents alone).
 */
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Chunk, Effect, Fiber, Option, Stream, TestClock } from "effect"
import { createParser, type EventSourceMessage } from "eventsource-parser"
import { errorBody } from "../src/Domain/Errors.js"
import { OrganizationId } from "../src/Domain/Ids.js"
import { eventStream, frameText } from "../src/LiveEvents/Http.js"
import { type CommittedEvent, LiveEvents, liveEventsLayer } from "../src/LiveEvents/LiveEvents.js"
import { refusedWith } from "./support/Refusal.js"
import { untilAfterEachSignal } from "./support/Signals.js"
import { addInstance, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { postUpstream } from "./support/TypedWebhooks.js"
import { type BusinessNumber, envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

interface OpenStream {
  readonly status: number
  readonly contentType: string | null
  /** The next server-sent event (comments, the heartbeat, are skipped by the parser). */
  readonly next: () => Promise<EventSourceMessage>
  readonly close: () => void
}

/**
 * Opens the stream with fetch (EventSource cannot send an Authorization header) and parses it as a
 * browser would. Raw: the typed client reads an answer whole, and a stream does not end.
 */
const openStream = (baseUrl: string, token: string, query = "") =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<OpenStream> => {
      const abort = new AbortController()
      const response = await fetch(`${baseUrl}/api/events/stream${query}`, {
        headers: { authorization: `Bearer ${token}` },
        signal: abort.signal
      })
      const parsed: Array<EventSourceMessage> = []
      const parser = createParser({ onEvent: (event) => parsed.push(event) })
      const reader = response.body?.getReader()
      const decoder = new TextDecoder()
      const next = async (): Promise<EventSourceMessage> => {
        for (;;) {
          const event = parsed.shift()
          if (event !== undefined) return event
          const chunk = await reader?.read()
          if (chunk === undefined || chunk.done) throw new Error("the stream ended")
          parser.feed(decoder.decode(chunk.value, { stream: true }))
        }
      }
      return {
        status: response.status,
        contentType: response.headers.get("content-type"),
        next,
        close: () => abort.abort()
      }
    }),
    (stream) => Effect.sync(stream.close)
  )

const nextEvent = (stream: OpenStream) => Effect.promise(stream.next)

/** Posts one status change for the number, as the upstream does (raw, see postUpstream); answers the message id it carries. */
const postStatus = (number: BusinessNumber) =>
  Effect.gen(function*() {
    const id = wamid()
    yield* postUpstream(envelope([number.wabaId, [statusChange(number, status(id, "delivered", 1750263790))]]))
    return id
  })

/** The message ids of the statuses an event's data carries. */
const statusIdsOf = (event: EventSourceMessage): ReadonlyArray<string> =>
  [...event.data.matchAll(/"id":"(wamid\.[^"]+)"/g)].map((match) => match[1] ?? "")

const committed = (n: number, instanceId = "ins_a", organizationId = "org_a"): CommittedEvent => ({
  id: `evt_${n}`,
  instanceId,
  body: JSON.stringify({ n }),
  changes: [{ route: { organization_id: organizationId } }]
})

const idsOf = (frames: Chunk.Chunk<{ readonly _tag: string }>) =>
  Chunk.toReadonlyArray(frames).map((
    frame
  ) => ("id" in frame ? frame.id : "count" in frame ? `dropped ${frame.count}` : frame._tag))

describe("LiveEvents, a slow stream", () => {
  plain.scoped(
    "keeps at most its buffer, then tells how many events it dropped, after what it kept; later events flow again",
    () =>
      Effect.gen(function*() {
        const live = yield* Effect.provide(LiveEvents, liveEventsLayer(2))
        const frames = yield* live.subscribe({
          organizationId: OrganizationId.make("org_a"),
          instanceId: undefined,
          credentialId: "test"
        })
        const pull = yield* Stream.toPull(frames)
        live.publish([committed(1), committed(2), committed(3), committed(4), committed(5, "ins_b")])
        expect(idsOf(yield* pull)).toEqual(["evt_1", "evt_2", "dropped 3"])
        live.publish([committed(6), committed(7, "ins_a", "org_other")])
        expect(idsOf(yield* pull)).toEqual(["evt_6"])
      })
  )

  plain.effect(
    "a stream for one instance gets only its events; a closed stream is removed",
    () =>
      Effect.gen(function*() {
        const live = yield* Effect.provide(LiveEvents, liveEventsLayer(2))
        yield* Effect.scoped(Effect.gen(function*() {
          const pull = yield* Stream.toPull(
            yield* live.subscribe({
              organizationId: OrganizationId.make("org_a"),
              instanceId: "ins_a",
              credentialId: "test"
            })
          )
          expect(live.openStreams("org_a")).toBe(1)
          live.publish([committed(1, "ins_b"), committed(2, "ins_b"), committed(3, "ins_b"), committed(4)])
          expect(idsOf(yield* pull)).toEqual(["evt_4"])
        }))
        expect(live.openStreams("org_a")).toBe(0)
      })
  )

  plain.scoped(
    "a quiet stream writes a comment every 5 s, so that Bun's idle timeout (10 s) never closes it",
    () =>
      Effect.gen(function*() {
        const live = yield* Effect.provide(LiveEvents, liveEventsLayer(2))
        const decoder = new TextDecoder()
        const pull = yield* Stream.toPull(
          Stream.map(
            eventStream(live, {
              organizationId: OrganizationId.make("org_a"),
              instanceId: undefined,
              credentialId: "test"
            }),
            (bytes) => decoder.decode(bytes)
          )
        )
        expect(Chunk.toReadonlyArray(yield* pull)).toEqual([
          "retry: 3000\nevent: ready\ndata: {\"instance_id\":null}\n\n"
        ])
        const next = yield* Effect.fork(pull)
        yield* TestClock.adjust("4999 millis")
        expect(next.unsafePoll()).toBeNull()
        yield* TestClock.adjust("1 millis")
        expect(Chunk.toReadonlyArray(yield* Fiber.join(next))).toEqual([": keep-alive\n\n"])
      })
  )

  plain.scoped(
    "while a send queue is busy each heartbeat is an event: queue with the numbers' queues, once more when it falls quiet",
    () =>
      Effect.gen(function*() {
        const live = yield* Effect.provide(LiveEvents, liveEventsLayer(2))
        const queue = (depth: number, pace: number) => ({
          instance_id: "ins_a",
          phone_number_id: "106540352242922",
          depth,
          oldest_wait_seconds: depth > 0 ? 2 : 0,
          send_rate: 80,
          sends_per_second: pace
        })
        // What the queues read at each heartbeat: busy, draining, then quiet twice.
        const readings = [[queue(120, 80)], [queue(0, 12)], [queue(0, 0)], [queue(0, 0)]]
        let tick = 0
        const decoder = new TextDecoder()
        const pull = yield* Stream.toPull(
          Stream.map(
            eventStream(live, {
              organizationId: OrganizationId.make("org_a"),
              instanceId: undefined,
              credentialId: "t"
            }, {
              queues: Effect.sync(() => readings[Math.min(tick++, readings.length - 1)] ?? [])
            }),
            (bytes) => decoder.decode(bytes)
          )
        )
        yield* pull
        const beat = Effect.gen(function*() {
          const next = yield* Effect.fork(pull)
          yield* TestClock.adjust("5 seconds")
          return Chunk.toReadonlyArray(yield* Fiber.join(next)).join("")
        })
        const queueEvent = (queues: ReadonlyArray<ReturnType<typeof queue>>) =>
          `event: queue\ndata: ${JSON.stringify({ data: queues })}\n\n`
        expect(yield* beat).toBe(queueEvent([queue(120, 80)]))
        expect(yield* beat).toBe(queueEvent([queue(0, 12)]))
        expect(yield* beat).toBe(queueEvent([queue(0, 0)]))
        expect(yield* beat).toBe(": keep-alive\n\n")
      })
  )

  plain("a dropped notice is a named event whose data says how many", () => {
    expect(frameText({ _tag: "Dropped", count: 3 })).toBe(
      "event: dropped\ndata: {\"dropped\":3,\"message\":\"3 events were dropped: this client read them too slowly\"}\n\n"
    )
    expect(
      frameText({
        _tag: "Event",
        id: "evt_1",
        instanceId: "ins_a",
        receivedAt: "2026-01-01T00:00:00.000Z",
        body: "{\"a\":1}"
      })
    )
      .toBe(
        "id: evt_1\ndata: {\"id\":\"evt_1\",\"instance_id\":\"ins_a\",\"received_at\":\"2026-01-01T00:00:00.000Z\",\"payload\":{\"a\":1}}\n\n"
      )
  })
})

// (After the unit tests: `layer` below gives the shared `it` its own runtime, without the test services.)
layer(testHub(), { excludeTestServices: true })("GET /api/events/stream", (it) => {
  it.scoped("a change posted to /upstream/events arrives on the organization's stream, with the envelope webhooks get", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const stream = yield* openStream(hub.baseUrl, tenant.orgToken)
      expect(stream.status).toBe(200)
      expect(stream.contentType).toContain("text/event-stream")
      const ready = yield* nextEvent(stream)
      expect(ready.event).toBe("ready")
      expect(JSON.parse(ready.data)).toEqual({ instance_id: null })

      const id = yield* postStatus(tenant)
      const event = yield* nextEvent(stream)
      expect(event.event).toBeUndefined()
      const data = JSON.parse(event.data)
      expect(event.id).toBe(data.id)
      expect(data.id).toMatch(/^evt_/)
      expect(data.instance_id).toBe(tenant.instanceId)
      expect(Number.isNaN(Date.parse(data.received_at))).toBe(false)
      expect(data.payload).toEqual(
        envelope([tenant.wabaId, [statusChange(tenant, status(id, "delivered", 1750263790))]])
      )
    }))

  it.scoped("an instance token sees only its instance's changes; its organization's token sees both, in commit order", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const sibling = yield* addInstance(tenant)
      const own = yield* openStream(hub.baseUrl, tenant.instanceToken)
      const all = yield* openStream(hub.baseUrl, tenant.orgToken)
      expect(JSON.parse((yield* nextEvent(own)).data)).toEqual({ instance_id: tenant.instanceId })
      expect((yield* nextEvent(all)).event).toBe("ready")

      const siblingsChange = yield* postStatus({ phoneNumberId: sibling.phoneNumberId, wabaId: tenant.wabaId })
      const ownChange = yield* postStatus(tenant)
      // Had the sibling's change reached the instance stream, it would have come first.
      const seen = yield* nextEvent(own)
      expect(JSON.parse(seen.data).instance_id).toBe(tenant.instanceId)
      expect(statusIdsOf(seen)).toEqual([ownChange])
      expect(statusIdsOf(yield* nextEvent(all))).toEqual([siblingsChange])
      expect(statusIdsOf(yield* nextEvent(all))).toEqual([ownChange])
    }))

  it.scoped("another organization's changes never reach a stream; an organization token may name one of its instances", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const sibling = yield* addInstance(tenant)
      const stranger = yield* seedTenant()
      const named = yield* openStream(hub.baseUrl, tenant.orgToken, `?instance_id=${sibling.instanceId}`)
      expect(JSON.parse((yield* nextEvent(named)).data)).toEqual({ instance_id: sibling.instanceId })

      yield* postStatus(stranger)
      yield* postStatus(tenant)
      const siblingsChange = yield* postStatus({ phoneNumberId: sibling.phoneNumberId, wabaId: tenant.wabaId })
      expect(statusIdsOf(yield* nextEvent(named))).toEqual([siblingsChange])
    }))

  it.scoped("a simulated inbound message (POST /sandbox/inbound) arrives on the stream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const stream = yield* openStream(hub.baseUrl, tenant.instanceToken)
      yield* nextEvent(stream)
      const client = yield* hub.client(tenant.instanceToken)
      const sent = yield* client.sandbox.inbound({
        payload: { from: "16505551234", type: "text", text: { body: "Hi there" } }
      })
      const data = JSON.parse((yield* nextEvent(stream)).data)
      const change = data.payload.entry[0].changes[0]
      expect(change.field).toBe("messages")
      expect(change.value.messages).toEqual([
        expect.objectContaining({ id: sent.id, from: "16505551234", text: { body: "Hi there" } })
      ])
    }))

  it.effect("refusals: no token 401, a session token 403, another instance 403, an unknown instance 404", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const sibling = yield* addInstance(tenant)
      // Raw: the edge's refusals, of no token (its exact body) and of a token of the wrong kind.
      const anonymous = yield* hub.request("GET", "/api/events/stream")
      expect(anonymous.status).toBe(401)
      expect(anonymous.body).toEqual({ statusCode: 401, message: "Unauthorized" })
      const session = yield* hub.request("GET", "/api/events/stream", { token: tenant.sessionToken })
      expect(session.status).toBe(403)
      expect(session.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      // The instance a stream names: refused before any stream opens, so the typed client reads the refusal.
      const byInstance = yield* hub.client(tenant.instanceToken)
      const foreign = yield* refusedWith(
        byInstance.liveEvents.stream({ urlParams: { instance_id: sibling.instanceId } }),
        "Forbidden"
      )
      expect(errorBody(foreign)).toMatchObject({ statusCode: 403, error: "forbidden_instance" })
      const byOrg = yield* hub.client(tenant.orgToken)
      const unknown = yield* refusedWith(
        byOrg.liveEvents.stream({ urlParams: { instance_id: "ins_nothere" } }),
        "NotFound"
      )
      expect(errorBody(unknown)).toMatchObject({ statusCode: 404 })
    }))

  it.effect("a client that goes away is unsubscribed", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const live = yield* LiveEvents
      const tenant = yield* seedTenant()
      yield* Effect.scoped(Effect.gen(function*() {
        const stream = yield* openStream(hub.baseUrl, tenant.orgToken)
        yield* nextEvent(stream)
        expect(live.openStreams(tenant.organizationId)).toBe(1)
      }))
      // The server learns of the closed connection on its own time: look again as streams close (bounded).
      const closed = Effect.sync(() => (live.openStreams(tenant.organizationId) === 0 ? Option.some(0) : Option.none()))
      yield* untilAfterEachSignal(live.streamsOpen, "the stream closed", closed)
      expect(live.openStreams(tenant.organizationId)).toBe(0)
    }))
})

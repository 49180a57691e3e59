/** GET /api/events/stream: the caller's live events as server-sent events, for as long as its credential holds. */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Chunk, Clock, Duration, Effect, Either, Queue, Schedule, Stream } from "effect"
import { HubApi } from "../Api.js"
import { hashSecret } from "../ApiTokens/Secrets.js"
import { TokenResolver } from "../ApiTokens/TokenResolver.js"
import { HubConfig } from "../Config.js"
import { CurrentPrincipal, type Principal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { selectorOf } from "../Instances/RequestTarget.js"
import { type Audience, LiveEvents, type LiveFrame, type StreamLimits } from "./LiveEvents.js"
import { busy, type QueueSnapshot, QueueSnapshots } from "./QueueSnapshots.js"

/** A comment every 5 s keeps a stream busy for proxies that close quiet connections, and rechecks its credential. */
export const HEARTBEAT = Duration.seconds(5)

/** One frame as server-sent event text. The event's body is JSON text already (one line), so it is embedded, not parsed again. */
export const frameText = (frame: LiveFrame): string =>
  frame._tag === "Event"
    ? `id: ${frame.id}\ndata: {"id":${JSON.stringify(frame.id)},"instance_id":${JSON.stringify(frame.instanceId)},` +
      `"received_at":${JSON.stringify(frame.receivedAt)},"payload":${frame.body}}\n\n`
    : `event: dropped\ndata: ${
      JSON.stringify({
        dropped: frame.count,
        message: `${frame.count} events were dropped: this client read them too slowly`
      })
    }\n\n`

const encoder = new TextEncoder()

const KEEP_ALIVE = ": keep-alive\n\n"

/**
 * Each heartbeat's text: the queues as an `event: queue` while any is busy (and once more when all fall
 * quiet, so a client sees them drained), else a keep-alive comment.
 */
const heartbeats = (
  heartbeat: Duration.DurationInput,
  queues: Effect.Effect<ReadonlyArray<QueueSnapshot>> | undefined
) => {
  const ticks = Stream.fromSchedule(Schedule.spaced(heartbeat))
  if (queues === undefined) return Stream.as(ticks, KEEP_ALIVE)
  let wasBusy = false
  return Stream.mapEffect(ticks, () =>
    Effect.map(queues, (snapshots) => {
      const now = busy(snapshots)
      const shown = now || wasBusy
      wasBusy = now
      return shown ? `event: queue\ndata: ${JSON.stringify({ data: snapshots })}\n\n` : KEEP_ALIVE
    }))
}

/**
 * The audience's stream: `ready` once subscribed, then its frames and a heartbeat (the send queues when
 * `queues` is given and any is busy), until the client goes away or `ended` completes (the credential no
 * longer holds).
 */
export const eventStream = (
  live: LiveEvents["Type"],
  audience: Audience,
  options: {
    readonly heartbeat?: Duration.DurationInput
    readonly limits?: StreamLimits
    readonly ended?: Effect.Effect<void>
    readonly queues?: Effect.Effect<ReadonlyArray<QueueSnapshot>>
  } = {}
) =>
  Stream.unwrapScoped(Effect.map(live.subscribe(audience, options.limits), (frames) => {
    const ready = `retry: 3000\nevent: ready\ndata: ${JSON.stringify({ instance_id: audience.instanceId ?? null })}\n\n`
    const beats = heartbeats(options.heartbeat ?? HEARTBEAT, options.queues)
    return Stream.make(ready).pipe(
      Stream.concat(Stream.merge(Stream.map(frames, frameText), beats)),
      // Frames read together are written together.
      Stream.mapChunks((texts) => Chunk.of(encoder.encode(Chunk.join(texts, "")))),
      Stream.interruptWhen(options.ended ?? Effect.never)
    )
  }))

/**
 * Completes once the credential of `secret` no longer admits its holder: at once when it is revoked
 * (in this process, announced by another replica, or read from the revocation feed: TokenResolver.watch),
 * at its expiry, and, in any case, at the next heartbeat that finds it refused.
 */
export const credentialEnds = (
  resolver: TokenResolver,
  secret: string,
  principal: Principal,
  heartbeat: Duration.DurationInput = HEARTBEAT
) =>
  Effect.scoped(Effect.gen(function*() {
    const recheck = yield* Queue.sliding<void>(1)
    yield* Effect.acquireRelease(
      Effect.sync(() => resolver.watch(hashSecret(secret), () => Queue.unsafeOffer(recheck, undefined))),
      (stop) => Effect.sync(stop)
    )
    const { expiresAt } = principal
    const untilExpiry = expiresAt === undefined
      ? Effect.never
      : Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Duration.millis(Math.max(0, expiresAt - now))))
    // Suspended: resolve answers from its cache at the call, and each check must ask afresh.
    const refused = Effect.map(Effect.either(Effect.suspend(() => resolver.resolve(secret))), Either.isLeft)
    const revoked = Effect.race(Queue.take(recheck), Effect.sleep(heartbeat)).pipe(
      Effect.zipRight(refused),
      Effect.repeat({ until: (gone) => gone })
    )
    yield* Effect.race(revoked, untilExpiry)
  }))

/** The Bearer secret of the request (the Authentication middleware has checked it already). */
const bearerOf = (request: HttpServerRequest.HttpServerRequest) => {
  const header = request.headers.authorization ?? ""
  return header.toLowerCase().startsWith("bearer ") ? header.slice(7).trim() : ""
}

export const LiveEventsHttpLive = HttpApiBuilder.group(HubApi, "liveEvents", (handlers) =>
  Effect.gen(function*() {
    const live = yield* LiveEvents
    const queues = yield* QueueSnapshots
    const access = yield* InstanceAccess
    const resolver = yield* TokenResolver
    const config = yield* HubConfig
    const limits: StreamLimits = { perToken: config.streamsPerToken, perOrganization: config.streamsPerOrganization }
    return handlers.handle("stream", ({ urlParams }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const request = yield* HttpServerRequest.HttpServerRequest
        const selector = selectorOf(urlParams)
        const named = selector.instanceId !== undefined || selector.phoneNumberId !== undefined
        // An instance token streams its own instance; an organization token all of its instances unless it names one.
        const instance = named || principal.instance !== undefined
          ? yield* access.resolve(principal, selector)
          : undefined
        const audience: Audience = {
          organizationId: principal.organizationId,
          instanceId: instance?.id,
          credentialId: principal.credentialId
        }
        // Past the limits the request is answered 429; the subscription checks them again as it takes its place.
        const refused = live.refusal(audience, limits)
        if (refused !== undefined) return yield* refused
        const stream = eventStream(live, audience, {
          limits,
          ended: credentialEnds(resolver, bearerOf(request), principal),
          queues: queues.of(audience)
        })
        return HttpServerResponse.stream(stream, {
          contentType: "text/event-stream",
          headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
        })
      }))
  }))

/** GET /api/events/stream: the caller's live events as server-sent events. */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Chunk, Duration, Effect, Schedule, Stream } from "effect"
import { HubApi } from "../Api.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { selectorOf } from "../Instances/RequestTarget.js"
import { type Audience, LiveEvents, type LiveFrame } from "./LiveEvents.js"

/** Bun closes a connection idle for 10 s (its default idleTimeout), an open stream included: a comment keeps it busy. */
export const HEARTBEAT = Duration.seconds(5)

/** One frame as server-sent event text. The event's body is JSON text already (one line), so it is embedded, not parsed again. */
export const frameText = (frame: LiveFrame): string =>
  frame._tag === "Event"
    ? `id: ${frame.id}\ndata: {"id":${JSON.stringify(frame.id)},"instance_id":${JSON.stringify(frame.instanceId)},` +
      `"received_at":${JSON.stringify(frame.receivedAt)},"payload":${frame.body}}\n\n`
    : `event: dropped\ndata: ${
      JSON.stringify({ dropped: frame.count, message: `${frame.count} events were dropped: this client read them too slowly` })
    }\n\n`

const encoder = new TextEncoder()

/** The audience's stream: `ready` once subscribed, then its frames and a heartbeat, until the client goes away. */
export const eventStream = (live: LiveEvents["Type"], audience: Audience, heartbeat: Duration.DurationInput = HEARTBEAT) =>
  Stream.unwrapScoped(Effect.map(live.subscribe(audience), (frames) => {
    const ready = `retry: 3000\nevent: ready\ndata: ${JSON.stringify({ instance_id: audience.instanceId ?? null })}\n\n`
    const beats = Stream.fromSchedule(Schedule.spaced(heartbeat)).pipe(Stream.as(": keep-alive\n\n"))
    return Stream.make(ready).pipe(
      Stream.concat(Stream.merge(Stream.map(frames, frameText), beats)),
      // Frames read together are written together.
      Stream.mapChunks((texts) => Chunk.of(encoder.encode(Chunk.join(texts, ""))))
    )
  }))

export const LiveEventsHttpLive = HttpApiBuilder.group(HubApi, "liveEvents", (handlers) =>
  Effect.gen(function*() {
    const live = yield* LiveEvents
    const access = yield* InstanceAccess
    return handlers.handle("stream", ({ urlParams }) =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const selector = selectorOf(urlParams)
        const named = selector.instanceId !== undefined || selector.phoneNumberId !== undefined
        // An instance token streams its own instance; an organization token all of its instances unless it names one.
        const instance = named || principal.instance !== undefined ? yield* access.resolve(principal, selector) : undefined
        return HttpServerResponse.stream(eventStream(live, { organizationId: principal.organizationId, instanceId: instance?.id }), {
          contentType: "text/event-stream",
          headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
        })
      }))
  }))

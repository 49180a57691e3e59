/** POST /upstream/events on the fast lane (see FastLane.ts). */
import { Effect, Layer } from "effect"
import { installHotRoute } from "../FastLane.js"
import { makeReceiveUpstream } from "./Http.js"

export const UpstreamEventsFastRouteLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const receive = yield* makeReceiveUpstream
    yield* installHotRoute("POST /upstream/events", (request) =>
      receive(
        request.headers.get("content-length") ?? undefined,
        Effect.promise(() => request.arrayBuffer()),
        request.headers.get("x-hub-signature-256") ?? undefined
      ))
  })
)

/**
 * Sandbox end to end: the payloads the sandbox upstream emits (status events after a send) enter
 * through the same Ingress as real upstream posts, without the signature, which only guards the
 * public endpoint. POST /sandbox/inbound builds its payload with the sandbox's inboundMessagePayload.
 */
import { Effect, Layer } from "effect"
import { Ingress } from "../UpstreamEvents/Ingress.js"
import { SandboxEvents } from "./Events.js"

export const SandboxEventsLive = Layer.effect(
  SandboxEvents,
  Effect.map(Ingress, (ingress) =>
    SandboxEvents.of({
      emit: (payload) =>
        ingress.ingest(payload).pipe(
          Effect.asVoid,
          Effect.catchAllCause((cause) => Effect.logWarning("A sandbox event was not accepted", cause))
        )
    }))
)

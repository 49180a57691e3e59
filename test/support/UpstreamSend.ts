/** The Upstream's send (a plain promise) as an effect, for tests that call the upstream directly. */
import { Effect } from "effect"
import type { Upstream, UpstreamTarget } from "../../src/Upstream/Upstream.js"
import type { JsonObject } from "../../src/Domain/Json.js"

export const sendVia = (upstream: Upstream["Type"], target: UpstreamTarget, body: JsonObject) =>
  Effect.flatMap(Effect.promise(() => upstream.sendMessage(target, body)), (outcome) => outcome)

/** The Upstream's send (a plain promise) as an effect, for tests that call the upstream directly. */
import { Effect } from "effect"
import type { JsonObject } from "../../src/Domain/Json.js"
import type { Upstream, UpstreamTarget } from "../../src/Upstream/Upstream.js"

export const sendVia = (upstream: Upstream["Type"], target: UpstreamTarget, body: JsonObject) =>
  Effect.flatMap(Effect.promise(() => upstream.sendMessage(target, body)), (outcome) => outcome)

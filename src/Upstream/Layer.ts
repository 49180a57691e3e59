/** UpstreamLive: the Graph API or the in-process sandbox, as HUB_UPSTREAM says. */
import { Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import type { Metrics } from "../Metrics/Metrics.js"
import type { SandboxEvents } from "../Sandbox/Events.js"
import { SandboxUpstream } from "../Sandbox/Upstream.js"
import { GraphUpstream } from "./Graph.js"
import type { Upstream } from "./Upstream.js"

/** Needs SandboxEvents (where sandbox status events go; Graph mode never uses it) and Metrics (the Graph's calls). */
export const UpstreamLive = Layer.unwrapEffect(
  Effect.map(
    HubConfig,
    (config): Layer.Layer<Upstream, never, HubConfig | Metrics | SandboxEvents> =>
      config.upstream === "graph" ? GraphUpstream : SandboxUpstream
  )
)

/** UpstreamLive: the Graph API or the in-process sandbox, as HUB_UPSTREAM says. */
import { Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import { GraphUpstream } from "./Graph.js"
import { SandboxUpstream } from "./Sandbox.js"

/** Needs SandboxEvents (where sandbox status events go); Graph mode never uses it. */
export const UpstreamLive = Layer.unwrapEffect(
  Effect.map(HubConfig, (config) => config.upstream === "graph" ? GraphUpstream : SandboxUpstream)
)

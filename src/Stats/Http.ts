/** The overview's handler: the Stats service's time series for the request's principal. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { Stats } from "./Stats.js"

export const StatsHttpLive = HttpApiBuilder.group(
  HubApi,
  "stats",
  (handlers) =>
    Effect.map(
      Stats,
      (stats) =>
        handlers.handle("timeseries", ({ urlParams }) =>
          Effect.flatMap(CurrentPrincipal, (principal) => stats.timeseries(principal, urlParams)))
    )
)

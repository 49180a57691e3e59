/** Broadcasts' handlers: each a step of the Broadcasts service for the request's principal. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { Broadcasts } from "./Broadcasts.js"

export const BroadcastsHttpLive = HttpApiBuilder.group(
  HubApi,
  "broadcasts",
  (handlers) =>
    Effect.map(Broadcasts, (broadcasts) =>
      handlers
        .handle("create", ({ payload }) => Effect.flatMap(CurrentPrincipal, (p) => broadcasts.create(p, payload)))
        .handle("list", ({ urlParams }) => Effect.flatMap(CurrentPrincipal, (p) => broadcasts.list(p, urlParams)))
        .handle("get", ({ path }) => Effect.flatMap(CurrentPrincipal, (p) => broadcasts.get(p, path.broadcastId)))
        .handle(
          "addRecipients",
          ({ path, payload }) =>
            Effect.flatMap(CurrentPrincipal, (p) => broadcasts.addRecipients(p, path.broadcastId, payload.recipients))
        )
        .handle(
          "recipients",
          ({ path, urlParams }) =>
            Effect.flatMap(CurrentPrincipal, (p) => broadcasts.recipients(p, path.broadcastId, urlParams))
        )
        .handle(
          "cancel",
          ({ path }) => Effect.flatMap(CurrentPrincipal, (p) => broadcasts.cancel(p, path.broadcastId))
        ))
)

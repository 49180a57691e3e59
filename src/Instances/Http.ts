import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { instanceRecord } from "./Api.js"
import { InstancesRepo } from "./Repo.js"

export const InstancesHttpLive = HttpApiBuilder.group(HubApi, "instances", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const config = yield* HubConfig
    return handlers.handle("list", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const rows = yield* repo.listByOrganization(principal.organizationId)
        return { data: rows.map((row) => instanceRecord(row, config.sendRatePerSecond)) }
      }))
  }))

import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { sendRateOf } from "../PhoneNumbers/Throughput.js"
import { ThroughputRepo } from "../PhoneNumbers/ThroughputRepo.js"
import { instanceRecord } from "./Api.js"
import { InstancesRepo } from "./Repo.js"

export const InstancesHttpLive = HttpApiBuilder.group(HubApi, "instances", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const throughputs = yield* ThroughputRepo
    const config = yield* HubConfig
    return handlers.handle("list", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const rows = yield* repo.listByOrganization(principal.organizationId)
        const levels = yield* Effect.orDie(throughputs.levels)
        return {
          data: rows.map((row) => instanceRecord(row, sendRateOf(levels.get(row.phone_number_id), config.sendRateCap)))
        }
      }))
  }))

/** The send queues' handler: each visible instance's number, with its queue as the database holds it. */
import { HttpApiBuilder } from "@effect/platform"
import { Clock, Effect } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { InstancesRepo } from "../Instances/Repo.js"
import { sendRateOf } from "../PhoneNumbers/Throughput.js"
import { ThroughputRepo } from "../PhoneNumbers/ThroughputRepo.js"
import { SendQueueRepo } from "./Repo.js"

export const SendQueueHttpLive = HttpApiBuilder.group(HubApi, "sendQueue", (handlers) =>
  Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const instances = yield* InstancesRepo
    const throughputs = yield* ThroughputRepo
    const { sendRateCap } = yield* HubConfig
    return handlers.handle("list", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const rows = yield* instances.listByOrganization(principal.organizationId)
        const visible = rows.filter((row) => principal.instance === undefined || principal.instance.id === row.id)
        const readings = yield* Effect.orDie(queue.readings(yield* Clock.currentTimeMillis))
        const levels = yield* Effect.orDie(throughputs.levels)
        const byNumber = new Map(readings.map((reading) => [reading.phoneNumberId, reading]))
        return {
          data: visible.map((row) => ({
            instance_id: row.id,
            phone_number_id: row.phone_number_id,
            depth: byNumber.get(row.phone_number_id)?.depth ?? 0,
            oldest_wait_seconds: byNumber.get(row.phone_number_id)?.oldestWaitSeconds ?? 0,
            send_rate: sendRateOf(levels.get(row.phone_number_id), sendRateCap)
          }))
        }
      }))
  }))

/**
 * The send queues as callers see them: each visible instance's number with its queued sends, the oldest
 * wait, its pace and the pace it keeps (sends a second, measured). Read by GET /api/send-queues and, for
 * the live streams, as their `queue` events (LiveEvents/QueueSnapshots.ts).
 */
import { Clock, Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import type { OrganizationId } from "../Domain/Ids.js"
import { InstancesRepo } from "../Instances/Repo.js"
import { QueueSnapshots } from "../LiveEvents/QueueSnapshots.js"
import { sendRateOf } from "../PhoneNumbers/Throughput.js"
import { ThroughputRepo } from "../PhoneNumbers/ThroughputRepo.js"
import { SendQueueRepo } from "./Repo.js"

export class SendQueues extends Effect.Service<SendQueues>()("SendQueues", {
  effect: Effect.gen(function*() {
    const queue = yield* SendQueueRepo
    const instances = yield* InstancesRepo
    const throughputs = yield* ThroughputRepo
    const { sendRateCap } = yield* HubConfig
    /** The organization's numbers (one instance's, when named), each with its queue as the database holds it. */
    const visible = (organizationId: OrganizationId, instanceId: string | undefined) =>
      Effect.gen(function*() {
        const rows = (yield* instances.listByOrganization(organizationId))
          .filter((row) => instanceId === undefined || instanceId === row.id)
        const readings = yield* Effect.orDie(
          queue.readings(yield* Clock.currentTimeMillis, rows.map((row) => row.phone_number_id))
        )
        const levels = yield* Effect.orDie(throughputs.levels)
        const byNumber = new Map(readings.map((reading) => [reading.phoneNumberId, reading]))
        return rows.map((row) => {
          const reading = byNumber.get(row.phone_number_id)
          return {
            instance_id: row.id,
            phone_number_id: row.phone_number_id,
            depth: reading?.depth ?? 0,
            oldest_wait_seconds: reading?.oldestWaitSeconds ?? 0,
            send_rate: sendRateOf(levels.get(row.phone_number_id), sendRateCap),
            sends_per_second: reading?.sendsPerSecond ?? 0
          }
        })
      })
    return { visible } as const
  }),
  dependencies: [SendQueueRepo.Default, ThroughputRepo.Default]
}) {}

/** The live streams' view of the queues, from this feature. */
export const QueueSnapshotsLive = Layer.effect(
  QueueSnapshots,
  Effect.map(
    SendQueues,
    (queues) => QueueSnapshots.of({ of: (audience) => queues.visible(audience.organizationId, audience.instanceId) })
  )
)

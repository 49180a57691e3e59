/**
 * The overview's steps: whose counts a request may read (as the message list decides it), the window
 * of whole minutes ending with the current one, and the three series read and laid on every minute of
 * it, empty minutes as zeros (so a chart draws a quiet minute as 0, not as a line across the gap). The
 * current minute's queue depth is the queue's now: its sample may not be taken yet (each replica samples
 * once a minute, at its own second), and a missing sample would read as an empty queue.
 */
import { Clock, Effect } from "effect"
import type { Principal } from "../Domain/Principal.js"
import type { AttemptOutcome, MessageStatus } from "../Domain/Vocabulary.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { InstancesRepo, InstancesRepoLive } from "../Instances/Repo.js"
import { selectorOf } from "../Instances/RequestTarget.js"
import { SendQueueRepo } from "../SendQueue/Repo.js"
import type { Timeseries, TimeseriesQuery } from "./Api.js"
import { minuteOf, StatsRepo, type StatsScope } from "./Repo.js"

const MINUTE_MS = 60_000

type Bucket = (typeof Timeseries.Type)["minutes"][number]

/** A bucket as it is filled. */
interface OpenBucket {
  readonly minute: string
  readonly sends: Record<MessageStatus, number>
  readonly deliveries: Record<AttemptOutcome, number>
  queue_depth: number
}

/** The window's minutes, oldest first, each a bucket of zeros: `hours` of them, the last the current one. */
const emptyBuckets = (hours: number, nowMillis: number): Array<OpenBucket> => {
  const last = Math.floor(nowMillis / MINUTE_MS) * MINUTE_MS
  const count = hours * 60
  return Array.from({ length: count }, (_, i) => ({
    minute: new Date(last - (count - 1 - i) * MINUTE_MS).toISOString(),
    sends: { pending: 0, sent: 0, delivered: 0, read: 0, failed: 0 },
    deliveries: { succeeded: 0, failed: 0, dead: 0 },
    queue_depth: 0
  }))
}

/** The window's buckets with the rows' counts laid on their minutes (rows outside the window are left out). */
const fillBuckets = (
  buckets: Array<OpenBucket>,
  rows: {
    readonly sends: ReadonlyArray<{ readonly minute: string; readonly status: MessageStatus; readonly n: number }>
    readonly attempts: ReadonlyArray<{ readonly minute: string; readonly outcome: AttemptOutcome; readonly n: number }>
    readonly depths: ReadonlyArray<{ readonly minute: string; readonly n: number }>
  }
): ReadonlyArray<Bucket> => {
  const byMinute = new Map(buckets.map((bucket) => [minuteOf(bucket.minute), bucket]))
  for (const row of rows.sends) {
    const bucket = byMinute.get(row.minute)
    if (bucket !== undefined) bucket.sends[row.status] += row.n
  }
  for (const row of rows.attempts) {
    const bucket = byMinute.get(row.minute)
    if (bucket !== undefined) bucket.deliveries[row.outcome] += row.n
  }
  for (const row of rows.depths) {
    const bucket = byMinute.get(row.minute)
    if (bucket !== undefined) bucket.queue_depth = row.n
  }
  return buckets
}

export class Stats extends Effect.Service<Stats>()("Stats", {
  effect: Effect.gen(function*() {
    const repo = yield* StatsRepo
    const access = yield* InstanceAccess
    const instances = yield* InstancesRepo
    const queue = yield* SendQueueRepo

    /** Whose counts: the instance named or the token's own; else the whole organization (as the message list). */
    const scopeOf = (principal: Principal, query: typeof TimeseriesQuery.Type) =>
      Effect.gen(function*() {
        const selector = selectorOf(query)
        const named = selector.instanceId !== undefined || selector.phoneNumberId !== undefined
        const instance = named || principal.instance !== undefined
          ? yield* access.resolve(principal, selector)
          : undefined
        const scope: StatsScope = { organizationId: principal.organizationId, instanceId: instance?.id }
        const numbers = instance !== undefined
          ? [instance.phoneNumberId]
          : (yield* instances.listByOrganization(principal.organizationId)).map((row) => row.phone_number_id)
        return { scope, numbers: new Set(numbers) }
      })

    /** The queue depth of the scope's numbers now. */
    const depthNow = (numbers: ReadonlySet<string>, now: number) =>
      Effect.map(
        queue.readings(now, [...numbers]),
        (readings) => readings.reduce((sum, r) => sum + r.depth, 0)
      )

    const timeseries = (principal: Principal, query: typeof TimeseriesQuery.Type) =>
      Effect.gen(function*() {
        const { numbers, scope } = yield* scopeOf(principal, query)
        const now = yield* Clock.currentTimeMillis
        const buckets = emptyBuckets(query.hours, now)
        const from = buckets[0]?.minute ?? new Date(0).toISOString()
        const to = new Date(Date.parse(buckets[buckets.length - 1]?.minute ?? from) + MINUTE_MS).toISOString()
        const rows = yield* Effect.orDie(Effect.all({
          sends: repo.sendsSince(scope, from),
          attempts: repo.attemptsSince(scope, Date.parse(from)),
          depths: repo.depthsSince(scope, minuteOf(from)),
          depthNow: depthNow(numbers, now)
        }))
        const minutes = fillBuckets(buckets, rows)
        const current = buckets[buckets.length - 1]
        if (current !== undefined) current.queue_depth = rows.depthNow
        return { hours: query.hours, instance_id: scope.instanceId ?? null, from, to, minutes }
      }).pipe(Effect.withSpan("Stats.timeseries"))

    return { timeseries } as const
  }),
  dependencies: [StatsRepo.Default, InstanceAccess.Default, InstancesRepoLive, SendQueueRepo.Default]
}) {}

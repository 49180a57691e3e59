/**
 * What a live stream shows of the send queues (issue 32): at each heartbeat, while any of the audience's
 * numbers has sends queued or made in the last seconds (and once more when they all fall quiet), an
 * `event: queue` with each number's depth, oldest wait, pace and measured sends a second. The queues are
 * SendQueue/'s: it provides this (SendQueue/Queues.ts), so this folder does not import that one.
 */
import { Context, type Effect } from "effect"
import type { Audience } from "./LiveEvents.js"

/** One number's queue as the stream shows it (the same record as GET /api/send-queues). */
export interface QueueSnapshot {
  readonly instance_id: string
  readonly phone_number_id: string
  readonly depth: number
  readonly oldest_wait_seconds: number
  readonly send_rate: number
  readonly sends_per_second: number
}

export class QueueSnapshots extends Context.Tag("QueueSnapshots")<QueueSnapshots, {
  readonly of: (audience: Audience) => Effect.Effect<ReadonlyArray<QueueSnapshot>>
}>() {}

/** Whether a snapshot shows anything under way. */
export const busy = (snapshots: ReadonlyArray<QueueSnapshot>) =>
  snapshots.some((queue) => queue.depth > 0 || queue.sends_per_second > 0)

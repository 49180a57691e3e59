/**
 * Wakes the dispatcher: `notify` when deliveries may have become due (the ingress queued rows, a
 * near retry or a replay is due, the periodic poll), `wakeNow` when attempts only finished and
 * wait to be logged. Wake-ups coalesce (a sliding queue of one), so a burst costs one round, and none
 * is lost while the dispatcher is busy. A round leases only when rows may be due: after a `notify`,
 * or when rows may be queued behind attempts in flight (see Admission.queueEmpty).
 * On PostgreSQL every replica's dispatcher is also notified when any replica queues or releases
 * deliveries (LISTEN/NOTIFY, see Sql/Notify.ts), so a row committed anywhere starts within
 * milliseconds without waiting for the poll (and, each time listening starts again, looks at once).
 */
import { Effect, Queue } from "effect"
import { channels, subscribe } from "../Sql/Notify.js"

export interface DispatchSignalShape {
  /** Rows may have become due (plain, for timers and callbacks too; effects wrap it in Effect.sync). */
  readonly notify: () => void
  /** Wakes the dispatcher without saying that rows became due (an attempt finished). */
  readonly wakeNow: () => void
  /** Whether a notify came since the last call; clears it. */
  readonly takeDue: () => boolean
  /** Waits for the next wake-up (or returns at once if one arrived since the last wait). */
  readonly wait: Effect.Effect<void>
}

export class DispatchSignal extends Effect.Service<DispatchSignal>()("DispatchSignal", {
  scoped: Effect.tap(
    Effect.map(Queue.sliding<void>(1), (queue): DispatchSignalShape => {
      let due = false
      const wakeNow = () => {
        queue.unsafeOffer(undefined)
      }
      const notify = () => {
        due = true
        wakeNow()
      }
      return {
        notify,
        wakeNow,
        takeDue: () => {
          const was = due
          due = false
          return was
        },
        wait: Queue.take(queue)
      }
    }),
    (signal) => subscribe(channels.outbox, signal.notify, signal.notify)
  )
}) {}

/**
 * Wakes the dispatcher when deliveries become due: the ingress after it commits new outbox rows,
 * the dispatcher itself when an attempt finishes or a near retry comes due. Signals coalesce (a
 * sliding queue of one), so a burst of commits costs one wake-up, and none is lost while the
 * dispatcher is busy.
 */
import { Context, Effect, Layer, Queue } from "effect"

export class DispatchSignal extends Context.Tag("DispatchSignal")<DispatchSignal, {
  readonly notify: Effect.Effect<void>
  /** The same from plain callbacks (a finished fetch, a timer), without running an effect. */
  readonly unsafeNotify: () => void
  /** Waits for the next signal (or returns at once if one arrived since the last wait). */
  readonly wait: Effect.Effect<void>
}>() {}

export const DispatchSignalLive = Layer.effect(
  DispatchSignal,
  Effect.map(Queue.sliding<void>(1), (queue) =>
    DispatchSignal.of({
      notify: Queue.offer(queue, undefined).pipe(Effect.asVoid),
      unsafeNotify: () => {
        queue.unsafeOffer(undefined)
      },
      wait: Queue.take(queue)
    }))
)

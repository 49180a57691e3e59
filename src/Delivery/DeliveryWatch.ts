/**
 * Lets a request wait for a delivery's next logged attempt: POST /api/webhooks/{id}/test answers
 * with the outcome of its test event's attempt. The dispatcher tells the watch of the attempts it
 * has just committed; with nothing watched that costs one size check a round.
 *
 * It also counts the attempts logged (one update of a SubscriptionRef a logged batch, nothing per
 * delivery): tests wait on `attemptsLogged` to look again at the deliveries API when something was
 * logged, not on a timer.
 */
import { Deferred, Effect, type Scope, type Stream, SubscriptionRef } from "effect"
import type { AttemptRecord } from "./Records.js"

interface DeliveryWatchShape {
  /**
   * Starts watching a delivery (before it is written, so no attempt is missed) until the scope
   * closes; the effect returned waits for its next logged attempt.
   */
  readonly watch: (deliveryId: string) => Effect.Effect<Effect.Effect<void>, never, Scope.Scope>
  /** The attempts the dispatcher has just logged (committed), and what followed from them (a webhook disabled). */
  readonly logged: (records: ReadonlyArray<AttemptRecord>) => Effect.Effect<void>
  /** How many attempts were logged so far: the count now, then each new count (a batch at a time). */
  readonly attemptsLogged: Stream.Stream<number>
}

export class DeliveryWatch extends Effect.Service<DeliveryWatch>()("DeliveryWatch", {
  effect: Effect.gen(function*() {
    const watched = new Map<string, Set<Deferred.Deferred<void>>>()
    const count = yield* SubscriptionRef.make(0)
    const shape: DeliveryWatchShape = {
      watch: (deliveryId) =>
        Effect.acquireRelease(
          Effect.map(Deferred.make<void>(), (done) => {
            const set = watched.get(deliveryId) ?? new Set()
            set.add(done)
            watched.set(deliveryId, set)
            return done
          }),
          (done) =>
            Effect.sync(() => {
              const set = watched.get(deliveryId)
              set?.delete(done)
              if (set?.size === 0) watched.delete(deliveryId)
            })
        ).pipe(Effect.map((done) => Deferred.await(done))),
      logged: (records) =>
        Effect.zipRight(
          Effect.sync(() => {
            if (watched.size === 0) return
            for (const record of records) {
              for (const done of watched.get(record.delivery.id) ?? []) Deferred.unsafeDone(done, Effect.void)
            }
          }),
          SubscriptionRef.update(count, (n) => n + records.length)
        ),
      attemptsLogged: count.changes
    }
    return shape
  })
}) {}

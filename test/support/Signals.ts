/**
 * Waiting on what the hub signals, not on a timer: a check (through the API, as before) runs once at
 * the start and again each time the signal fires, until it holds or the deadline passes. Signals that
 * fire while a check runs are taken as one: the next check sees what all of them did.
 */
import { Clock, type Duration, Effect, Option, Stream } from "effect"
import { DeliveryWatch } from "../../src/Delivery/DeliveryWatch.js"
import { DEFAULT_DEADLINE } from "./Receivers.js"

/** Deadlines are kept in real time, also where the test runs the hub on the TestClock. */
const realClock = Clock.make()

/**
 * Runs `check` at once and after each emission of `signal` until it answers Some; dies naming `what`
 * after the deadline. `signal` must emit at the start (as SubscriptionRef's `changes` do), so nothing
 * that happens between the first check and the subscription is missed.
 */
export const untilAfterEachSignal = <A, E, R, R2>(
  signal: Stream.Stream<unknown, never, R2>,
  what: string,
  check: Effect.Effect<Option.Option<A>, E, R>,
  deadline: Duration.DurationInput = DEFAULT_DEADLINE
): Effect.Effect<A, never, R | R2> =>
  signal.pipe(
    Stream.buffer({ capacity: 1, strategy: "sliding" }),
    Stream.mapEffect(() => check),
    Stream.filterMap((found) => found),
    Stream.runHead,
    Effect.flatMap(
      Option.match({ onNone: () => Effect.dieMessage(`${what}: the signal ended`), onSome: Effect.succeed })
    ),
    Effect.orDie,
    Effect.raceFirst(
      Effect.zipRight(
        Effect.withClock(Effect.sleep(deadline), realClock),
        Effect.dieMessage(`${what} did not happen in time`)
      )
    )
  )

/** What `read` answers once `condition` holds of it, read again after each signal (see untilAfterEachSignal). */
export const untilSignalledThat = <A, E, R, R2>(
  signal: Stream.Stream<unknown, never, R2>,
  what: string,
  read: Effect.Effect<A, E, R>,
  condition: (a: A) => boolean,
  deadline?: Duration.DurationInput
): Effect.Effect<A, never, R | R2> =>
  untilAfterEachSignal(signal, what, Effect.map(read, (a) => (condition(a) ? Option.some(a) : Option.none())), deadline)

/** The hub's count of logged delivery attempts: fires each time the dispatcher commits attempts (and has acted on them). */
const attemptsLogged: Stream.Stream<number, never, DeliveryWatch> = Stream.unwrap(
  Effect.map(DeliveryWatch, (watch) => watch.attemptsLogged)
)

/** Waits until `condition` holds of what `read` answers, reading again each time delivery attempts are logged. */
export const untilAttemptsLogged = <A, E, R>(
  what: string,
  read: Effect.Effect<A, E, R>,
  condition: (a: A) => boolean,
  deadline?: Duration.DurationInput
) => untilSignalledThat(attemptsLogged, what, read, condition, deadline)

/**
 * A signal fired from plain callbacks (a logger, a listener): `fire` counts, `changes` emits the
 * count now, then each new count.
 */
export const makeSignal = () => {
  let count = 0
  const listeners = new Set<(n: number) => void>()
  return {
    fire: () => {
      count++
      for (const listener of listeners) listener(count)
    },
    changes: Stream.async<number>((emit) => {
      const listener = (n: number) => void emit.single(n)
      listeners.add(listener)
      void emit.single(count)
      return Effect.sync(() => listeners.delete(listener))
    })
  }
}

/**
 * A live clock that a test can move forward, for a hub served over real HTTP: handler fibers use
 * the server's clock, not the test's TestClock. Sleeps stay real; only the reported time shifts.
 */
import { Clock, Context, Effect, Layer } from "effect"

export class ShiftedClock extends Context.Tag("ShiftedClock")<ShiftedClock, {
  /** Moves the time every fiber of the hub reads forward by this many milliseconds. */
  readonly advance: (millis: number) => Effect.Effect<void>
}>() {}

export const shiftedClockLayer: Layer.Layer<ShiftedClock> = Layer.unwrapEffect(Effect.sync(() => {
  const live = Clock.make()
  let offset = 0
  const millis = () => live.unsafeCurrentTimeMillis() + offset
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: () => BigInt(millis()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    sleep: (duration) => live.sleep(duration)
  }
  return Layer.merge(
    Layer.setClock(clock),
    Layer.succeed(ShiftedClock, { advance: (ms) => Effect.sync(() => void (offset += ms)) })
  )
}))

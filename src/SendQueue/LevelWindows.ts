/**
 * A number's level, kept as Meta counts it: never more than `level` calls reaching Meta in any one
 * second, whatever the network's jitter between here and there.
 *
 * A call reaches Meta at some time between its start and its answer. So a call may start only while
 * fewer than `level` calls are in flight or were answered within the last second: then, of the calls
 * that reach Meta within any one second, the last to start saw every other one still in flight or
 * answered within the second before it started, and so counted them. Counting calls by their start
 * alone let jitter bunch them: scripts/bench.ts --scenarios queue saw 84 and 86 arrivals in one second
 * at 80/s (the first calls of each number, slowed by new connections, arrived with later ones). The
 * cost: each call holds its place for a second and its answer's time, so 80/s runs at about 79.6 with
 * answers in 5 ms.
 */

/** Calls of one number: in flight, and when those answered within the last second were answered (oldest first). */
interface Window {
  inFlight: number
  readonly answered: Array<number>
  /** Waiting for an answer, when every place is taken by calls in flight. */
  waiting: Array<() => void>
}

/**
 * How long after its answer a call holds its place: a second, and 2 ms for the rounding of clocks read in
 * whole milliseconds (with exactly a second, the fake upstream, timing arrivals to the microsecond, saw
 * 81 in one second at 80/s).
 */
const HOLD_MS = 1_002

export interface LevelWindows {
  /** Runs `call` once the number has a place under `level` (see the top of this file). */
  readonly call: <A>(phoneNumberId: string, level: number, call: () => Promise<A>) => Promise<A>
}

/** Resolves after `ms` milliseconds (a test's own when it moves the time itself). */
type Sleep = (ms: number) => Promise<void>

const timer: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

export const makeLevelWindows = (now: () => number, sleep: Sleep = timer): LevelWindows => {
  const windows = new Map<string, Window>()

  const place = async (window: Window, level: number) => {
    for (;;) {
      const at = now()
      while (window.answered[0] !== undefined && window.answered[0] <= at - HOLD_MS) window.answered.shift()
      if (window.inFlight + window.answered.length < Math.max(1, Math.floor(level))) {
        window.inFlight++
        return
      }
      // A call answered does not free its place: a second after its answer does.
      const oldest = window.answered[0]
      await (oldest === undefined
        ? new Promise<void>((resolve) => window.waiting.push(resolve))
        : sleep(oldest + HOLD_MS - at))
    }
  }

  return {
    call: async (phoneNumberId, level, call) => {
      const window = windows.get(phoneNumberId) ?? { inFlight: 0, answered: [], waiting: [] }
      windows.set(phoneNumberId, window)
      await place(window, level)
      try {
        return await call()
      } finally {
        window.inFlight--
        window.answered.push(now())
        const woken = window.waiting
        window.waiting = []
        for (const wake of woken) wake()
      }
    }
  }
}

/**
 * The soft memory target: over it the hub asks for a collection at every check, under it never.
 * Driven by TestClock; the probe stands in for the process's memory and Bun's collector.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, TestClock } from "effect"
import { keepUnder, MEMORY_CHECK_INTERVAL } from "../src/MemoryTarget.js"

const MB = 1024 * 1024

describe("memory target", () => {
  it.effect("collects at each check while resident memory is over the target, and not at all under it", () =>
    Effect.gen(function*() {
      let resident = 150 * MB
      let collections = 0
      const fiber = yield* Effect.fork(keepUnder(200 * MB, { residentBytes: () => resident, collect: () => collections++ }))
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 5))
      expect(collections).toBe(0)

      resident = 260 * MB
      yield* TestClock.adjust(MEMORY_CHECK_INTERVAL)
      expect(collections).toBe(1)
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 3))
      expect(collections).toBe(4)

      resident = 190 * MB
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 10))
      expect(collections).toBe(4)
      yield* Fiber.interrupt(fiber)
    }))
})

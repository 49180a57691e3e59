/**
 * The soft memory target: over it the hub asks for a collection at every check; further over it
 * runs one and waits, unless those would take more than their share of the time; under it nothing.
 * Driven by TestClock; the probe stands in for the process's memory and Bun's collector (and says
 * how long each collection it waited for took).
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, TestClock } from "effect"
import { keepUnder, MAX_COLLECTING_SHARE, MEMORY_CHECK_INTERVAL, WAITING_ABOVE } from "../src/MemoryTarget.js"

const MB = 1024 * 1024
const TARGET = 200 * MB

/** A probe whose resident memory the test sets, counting both kinds of collection. */
const makeProbe = (collectMs: number) => {
  const probe = {
    resident: 150 * MB,
    requested: 0,
    waited: 0,
    residentBytes: () => probe.resident,
    requestCollection: () => {
      probe.requested++
    },
    collect: () => {
      probe.waited++
      return collectMs
    }
  }
  return probe
}

describe("memory target", () => {
  it.effect("asks for a collection at each check while over the target, and nothing under it", () =>
    Effect.gen(function*() {
      const probe = makeProbe(1)
      const fiber = yield* Effect.fork(keepUnder(TARGET, probe))
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 5))
      expect([probe.requested, probe.waited]).toEqual([0, 0])

      probe.resident = TARGET * WAITING_ABOVE - MB
      yield* TestClock.adjust(MEMORY_CHECK_INTERVAL)
      expect([probe.requested, probe.waited]).toEqual([1, 0])
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 3))
      expect([probe.requested, probe.waited]).toEqual([4, 0])

      probe.resident = 190 * MB
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 10))
      expect([probe.requested, probe.waited]).toEqual([4, 0])
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("far over the target it waits for collections, within their share of the time", () =>
    Effect.gen(function*() {
      // Each collection takes 20 ms: within 5 % of the time that is one every 400 ms, not one per
      // check; the checks between only ask for one.
      const probe = makeProbe(20)
      probe.resident = 300 * MB
      const fiber = yield* Effect.fork(keepUnder(TARGET, probe))
      yield* TestClock.adjust(Duration.zero)
      expect([probe.requested, probe.waited]).toEqual([0, 1])
      yield* TestClock.adjust(Duration.times(MEMORY_CHECK_INTERVAL, 3))
      expect([probe.requested, probe.waited]).toEqual([3, 1])
      yield* TestClock.adjust(MEMORY_CHECK_INTERVAL)
      expect([probe.requested, probe.waited]).toEqual([3, 2])
      yield* TestClock.adjust(Duration.millis(20 / MAX_COLLECTING_SHARE))
      expect([probe.requested, probe.waited]).toEqual([6, 3])
      yield* Fiber.interrupt(fiber)
    }))
})

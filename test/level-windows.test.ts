/**
 * A number's level as Meta counts it (SendQueue/LevelWindows.ts): a call holds its place from its
 * start until a second after its answer, since it may reach Meta at any time in between.
 */
import { describe, expect, it } from "@effect/vitest"
import { makeLevelWindows } from "../src/SendQueue/LevelWindows.js"

/** A clock the test moves, and the sleeps asked of it, each resolved when the test says. */
const testTime = () => {
  let at = 0
  const sleeps: Array<{ readonly ms: number; readonly wake: () => void }> = []
  return {
    now: () => at,
    set: (ms: number) => void (at = ms),
    sleeps,
    sleep: (ms: number) => new Promise<void>((wake) => sleeps.push({ ms, wake }))
  }
}

/** A call the test answers when it chooses; `started` says whether the window let it begin. */
const pendingCall = () => {
  let answer: (value: string) => void = () => {}
  const call = { started: false, answer: (value: string) => answer(value) }
  const run = () => {
    call.started = true
    return new Promise<string>((resolve) => (answer = resolve))
  }
  return { call, run }
}

/** Lets every promise already settled run its continuations. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("a number's level windows", () => {
  it("a call holds its place while in flight and for a second after its answer", async () => {
    const time = testTime()
    const levels = makeLevelWindows(time.now, time.sleep)
    const [a, b, c] = [pendingCall(), pendingCall(), pendingCall()]
    const answered = [levels.call("n", 2, a.run), levels.call("n", 2, b.run), levels.call("n", 2, c.run)]
    await settle()
    expect([a.call.started, b.call.started, c.call.started]).toEqual([true, true, false])
    // Both places in flight: the third waits for an answer, not for a time.
    expect(time.sleeps).toEqual([])

    time.set(100)
    a.call.answer("a")
    expect(await answered[0]).toBe("a")
    await settle()
    // Answered at 100 ms, it may have reached Meta as late as that: its place is free a second (and
    // the clocks' rounding, 2 ms) later.
    expect(c.call.started).toBe(false)
    expect(time.sleeps.map((s) => s.ms)).toEqual([1_002])

    time.set(1_102)
    time.sleeps[0]?.wake()
    await settle()
    expect(c.call.started).toBe(true)
    b.call.answer("b")
    c.call.answer("c")
    expect(await Promise.all(answered)).toEqual(["a", "b", "c"])
  })

  it("numbers are kept apart, and a level below one still lets one call through", async () => {
    const time = testTime()
    const levels = makeLevelWindows(time.now, time.sleep)
    const [first, other, second] = [pendingCall(), pendingCall(), pendingCall()]
    void levels.call("n", 0.5, first.run)
    void levels.call("m", 0.5, other.run)
    void levels.call("n", 0.5, second.run)
    await settle()
    expect([first.call.started, other.call.started, second.call.started]).toEqual([true, true, false])
  })
})

/**
 * The fleet's pacing (src/Messages/SharedPacing.ts) on a model of its statement: the budget kept as
 * the upsert keeps it (GCRA, a second's burst), by a clock the test moves. What must hold: asks made
 * at once go in one statement, busy numbers' slices are renewed together when an epoch ends, and two
 * replicas sharing the budget never pass a number's rate in any second after the first. The statement
 * itself, on a real server, is in test/fleet.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "@effect/vitest"
import { makeSharedPacing } from "../src/Messages/SharedPacing.js"

type GrantAll = Parameters<typeof makeSharedPacing>[1]

/** The budget as send_pacing keeps it, one theoretical arrival time per number; each call one statement. */
const modelBudget = () => {
  const tat = new Map<string, number>()
  const statements: Array<ReadonlyArray<{ readonly phoneNumberId: string; readonly want: number }>> = []
  const grantAll: GrantAll = (asks) => {
    statements.push(asks)
    const now = Date.now()
    return Promise.resolve(asks.map((a) => {
      const interval = 1000 / a.ratePerSecond
      const before = tat.get(a.phoneNumberId)
      const base = before === undefined ? now : Math.max(before - a.giveBack * interval, now)
      const fits = before === undefined
        ? a.want
        : Math.max(0, Math.min(a.want, Math.floor((now + 1000 - base) / interval)))
      tat.set(a.phoneNumberId, base + fits * interval)
      return { phone_number_id: a.phoneNumberId, tat_ms: base + fits * interval, granted: fits, now_ms: now }
    }))
  }
  return { grantAll, statements }
}

const numbers = Array.from({ length: 16 }, (_, i) => `1555000${String(i).padStart(4, "0")}`)

/** The start of an epoch (a twentieth of a second), plus `ms`. */
const epochStart = (ms: number) => Math.ceil(Date.now() / 50) * 50 + 1_000_000 + ms

describe("the fleet's pacing, on a model of its statement", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["Date"] })
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it("asks of many numbers made at once go in one statement, and busy numbers are renewed together", async () => {
    vi.setSystemTime(epochStart(5))
    const budget = modelBudget()
    const pacing = makeSharedPacing(() => 1000, budget.grantAll)
    // Four sends of each number, the numbers side by side: their asks go together.
    for (let round = 0; round < 4; round++) {
      expect(await Promise.all(numbers.map((n) => pacing.takeAt(n, Date.now())))).toEqual(numbers.map(() => undefined))
    }
    const inFirstEpoch = budget.statements.length
    expect(inFirstEpoch).toBeLessThanOrEqual(3)
    expect(budget.statements[0]?.map((a) => a.phoneNumberId)).toEqual(numbers)
    // The next epoch: the first take renews every number that sent twice or more, in one statement.
    vi.setSystemTime(Date.now() + 50)
    expect(await Promise.all(numbers.map((n) => pacing.takeAt(n, Date.now())))).toEqual(numbers.map(() => undefined))
    expect(budget.statements.length).toBe(inFirstEpoch + 1)
    expect(budget.statements.at(-1)?.map((a) => a.phoneNumberId).sort()).toEqual(numbers)
    expect(budget.statements.at(-1)?.every((a) => a.want > 1)).toBe(true)
  })

  it("two replicas sending one number at three times its rate never pass it in any second after the first", async () => {
    const rate = 200
    vi.setSystemTime(epochStart(0))
    const began = Date.now()
    const budget = modelBudget()
    const replicas = [makeSharedPacing(() => rate, budget.grantAll), makeSharedPacing(() => rate, budget.grantAll)]
    const made: Array<number> = []
    // Each replica offers a send every 3 ms for three seconds.
    for (let ms = 0; ms < 3000; ms++) {
      vi.setSystemTime(began + ms)
      if (ms % 3 !== 0) continue
      for (const replica of replicas) {
        if ((await replica.takeAt("15550001111", Date.now())) === undefined) made.push(Date.now())
      }
    }
    // A second's burst, then the rate: each second past the first holds the rate, one more at its edge,
    // and at most one slice (1/20 of the rate) per replica. Each replica alone would make twice the rate.
    const seconds = Array.from({ length: 1001 }, (_, step) => began + 1000 + step).map((from) =>
      made.filter((at) => at >= from && at < from + 1000).length
    )
    expect(Math.max(...seconds)).toBeLessThanOrEqual(rate + 1 + 2 * (rate / 20))
    expect(Math.min(...seconds)).toBeGreaterThanOrEqual(rate - 2 * (rate / 20))
  })
})

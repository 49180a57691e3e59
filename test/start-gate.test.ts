/**
 * The start gate (src/Delivery/StartGate.ts): leased rows start within the receivers' shares, the
 * rest wait, first attempts before retries, each in the order offered; one that could no longer end
 * within its lease lapses instead of starting; stopping lapses every waiting row.
 */
import { describe, expect, it } from "@effect/vitest"
import { makeStartGate } from "../src/Delivery/StartGate.js"

const SHARES = { concurrency: 3, perWebhook: 2, perOrganization: 3 }

/** A gate on a clock the test sets, with what it started and lapsed, by row name. */
const gateAt = (shares = SHARES) => {
  let clock = 1_000
  const started: Array<string> = []
  const lapsed: Array<string> = []
  const gate = makeStartGate(shares, () => clock)
  const owned = (webhook: string, organization = "org_a") => ({ webhook_id: webhook, organization_id: organization })
  const offer = (name: string, webhook: string, options: { retry?: boolean; startBy?: number; org?: string } = {}) =>
    gate.offer({
      delivery: owned(webhook, options.org),
      retry: options.retry ?? false,
      startBy: options.startBy ?? 10_000,
      start: () => started.push(name),
      lapse: () => lapsed.push(name)
    })
  return {
    gate,
    offer,
    started,
    lapsed,
    end: (webhook: string, organization = "org_a") => gate.ended(owned(webhook, organization)),
    setClock: (ms: number) => {
      clock = ms
    }
  }
}

describe("start gate", () => {
  it("starts within a webhook's share and the overall one; the rest wait and start in order as attempts end", () => {
    const g = gateAt()
    for (const name of ["a1", "a2", "a3", "a4"]) g.offer(name, "whk_a")
    g.offer("b1", "whk_b")
    g.offer("b2", "whk_b")
    // Two of whk_a (its share), then one of whk_b fills the three slots overall.
    expect(g.started).toEqual(["a1", "a2", "b1"])
    expect([g.gate.running(), g.gate.waiting()]).toEqual([3, 3])
    g.end("whk_b")
    // A slot overall, and whk_a is at its share: whk_b's next goes, a3 keeps its place.
    expect(g.started).toEqual(["a1", "a2", "b1", "b2"])
    g.end("whk_a")
    expect(g.started).toEqual(["a1", "a2", "b1", "b2", "a3"])
    g.end("whk_b")
    // A slot overall, but whk_a is at its share again: a4 waits for one of whk_a's to end.
    expect(g.started).toEqual(["a1", "a2", "b1", "b2", "a3"])
    g.end("whk_a")
    expect(g.started).toEqual(["a1", "a2", "b1", "b2", "a3", "a4"])
    expect([g.gate.running(), g.gate.waiting()]).toEqual([2, 0])
  })

  it("with slots scarce, a webhook that began waiting last still gets a freed slot in its turn", () => {
    // Four slots overall, two a webhook: whk_a and whk_b hold every slot with rows to spare.
    const g = gateAt({ concurrency: 4, perWebhook: 2, perOrganization: 4 })
    for (let i = 1; i <= 6; i++) g.offer(`a${i}`, "whk_a")
    for (let i = 1; i <= 6; i++) g.offer(`b${i}`, "whk_b")
    g.offer("c1", "whk_c")
    expect(g.started).toEqual(["a1", "a2", "b1", "b2"])
    g.end("whk_a")
    g.end("whk_b")
    g.end("whk_a")
    // Each freed slot in turn: whk_a's, whk_b's, then whk_c's (not whk_a's third, then fourth, ...).
    expect(g.started).toEqual(["a1", "a2", "b1", "b2", "a3", "b3", "c1"])
    g.end("whk_b")
    g.end("whk_c")
    g.end("whk_a")
    expect(g.started).toEqual(["a1", "a2", "b1", "b2", "a3", "b3", "c1", "a4", "b4", "a5"])
  })

  it("first attempts start before retries offered earlier", () => {
    const g = gateAt({ concurrency: 1, perWebhook: 1, perOrganization: 1 })
    g.offer("r1", "whk_a", { retry: true })
    g.offer("r2", "whk_a", { retry: true })
    g.offer("f1", "whk_a")
    expect(g.started).toEqual(["r1"])
    g.end("whk_a")
    g.end("whk_a")
    g.end("whk_a")
    expect(g.started).toEqual(["r1", "f1", "r2"])
  })

  it("an organization past its share takes idle slots but leaves a quarter of all free", () => {
    // 8 slots, a quarter (2) kept for organizations within their share of 2.
    const g = gateAt({ concurrency: 8, perWebhook: 8, perOrganization: 2 })
    for (let i = 0; i < 8; i++) g.offer(`a${i}`, "whk_a")
    expect(g.started).toHaveLength(6)
    g.offer("b0", "whk_b", { org: "org_b" })
    expect(g.started.at(-1)).toBe("b0")
    expect(g.gate.running()).toBe(7)
  })

  it("a row that could no longer end within its lease lapses instead of starting", () => {
    const g = gateAt({ concurrency: 1, perWebhook: 1, perOrganization: 1 })
    g.offer("first", "whk_a")
    g.offer("late", "whk_a", { startBy: 2_000 })
    g.offer("in time", "whk_a", { startBy: 60_000 })
    g.setClock(2_001)
    g.end("whk_a")
    expect(g.lapsed).toEqual(["late"])
    expect(g.started).toEqual(["first", "in time"])
  })

  it("closed, it starts nothing more: every waiting row lapses, and so does one offered later", () => {
    const g = gateAt({ concurrency: 1, perWebhook: 1, perOrganization: 1 })
    g.offer("running", "whk_a")
    g.offer("waiting", "whk_a")
    g.offer("retry", "whk_a", { retry: true })
    g.gate.close()
    expect(g.lapsed).toEqual(["waiting", "retry"])
    g.offer("after", "whk_b")
    g.end("whk_a")
    expect(g.started).toEqual(["running"])
    expect(g.lapsed).toEqual(["waiting", "retry", "after"])
  })
})

/**
 * The hand-off rule (Admission.ts): a new delivery skips the queue only when it overtakes nothing
 * this process knows to be queued and fits within the concurrency overall, its webhook's share and
 * its organization's (or the idle slots an organization past its share may take).
 */
import { describe, expect, it } from "@effect/vitest"
import { makeAdmission } from "../src/Delivery/Admission.js"
import { HANDOFF_DEPTH } from "../src/Delivery/Fairness.js"
import { makeReceiverPace } from "../src/Delivery/ReceiverPace.js"

/** A delivery of this webhook, of organization "org" unless another is named. */
const owned = (webhookId: string, organizationId = "org") => ({
  webhook_id: webhookId,
  organization_id: organizationId
})

/** An admission whose first lease came back short, as the dispatcher's first round does on an empty queue. */
const cleared = (
  limits: { readonly concurrency: number; readonly perWebhook: number; readonly perOrganization?: number }
) => {
  const admission = makeAdmission({ perOrganization: limits.concurrency, ...limits })
  admission.leased(limits.concurrency, [])
  return admission
}

describe("admission", () => {
  it("nothing skips the queue until a lease has come back short; a lease that asked nothing tells nothing", () => {
    const admission = makeAdmission({ concurrency: 4, perWebhook: 2, perOrganization: 4 })
    expect(admission.queueEmpty()).toBe(false)
    expect(admission.admit("a", "org")).toBe(false)
    admission.leased(0, [])
    expect(admission.admit("b", "org")).toBe(false)
    admission.leased(4, [owned("a")])
    expect(admission.queueEmpty()).toBe(true)
    expect(admission.admit("b", "org")).toBe(true)
    expect(admission.running()).toBe(2)
    expect(admission.inFlight()).toEqual(new Map([["a", 1], ["b", 1]]))
  })

  it("a webhook is admitted up to its share; a row queued then keeps its later rows queued until a short lease finds the webhook below its share", () => {
    const admission = cleared({ concurrency: 10, perWebhook: 2 })
    expect([admission.admit("a", "org"), admission.admit("a", "org"), admission.admit("a", "org")]).toEqual([
      true,
      true,
      false
    ])
    expect(admission.queueEmpty()).toBe(false)
    // Room again, but the queued row is older: the next one queues behind it.
    admission.finished(owned("a"))
    expect(admission.admit("a", "org")).toBe(false)
    // Other webhooks are not held back.
    expect(admission.admit("b", "org")).toBe(true)
    // The lease takes a's queued rows up to its share: a may still have rows waiting.
    admission.leased(7, [owned("a")])
    admission.finished(owned("a"))
    expect(admission.admit("a", "org")).toBe(false)
    // A short lease with a below its share: a has nothing waiting.
    admission.leased(7, [])
    expect(admission.admit("a", "org")).toBe(true)
  })

  it("once a row queues for want of room overall, no webhook skips the queue until a lease comes back short", () => {
    const admission = cleared({ concurrency: 2, perWebhook: 2 })
    expect([admission.admit("a", "org"), admission.admit("b", "org"), admission.admit("c", "org")]).toEqual([
      true,
      true,
      false
    ])
    admission.finished(owned("a"))
    expect(admission.admit("d", "org")).toBe(false)
    admission.leased(1, [])
    expect(admission.admit("d", "org")).toBe(true)
  })

  it("a full lease may leave due rows, so the hand-off waits for a short one", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4 })
    admission.leased(2, [owned("a"), owned("b")])
    expect(admission.queueEmpty()).toBe(false)
    expect(admission.admit("c", "org")).toBe(false)
    admission.leased(2, [owned("a")])
    expect(admission.admit("c", "org")).toBe(true)
  })

  it("once closed nothing is admitted, and attempts are counted until they finish", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4 })
    expect(admission.admit("a", "org")).toBe(true)
    admission.close()
    expect(admission.admit("b", "org")).toBe(false)
    expect(admission.running()).toBe(1)
    admission.finished(owned("a"))
    expect(admission.running()).toBe(0)
    expect(admission.inFlight()).toEqual(new Map())
  })

  it("an organization is admitted up to its share while slots are scarce; others are not held back", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4, perOrganization: 2 })
    // Four slots: a quarter (one) stays free of organizations past their share, so A may take three.
    expect([
      admission.admit("a1", "A"),
      admission.admit("a2", "A"),
      admission.admit("a3", "A"),
      admission.admit("a4", "A")
    ]).toEqual([true, true, true, false])
    expect(admission.inFlightByOrganization()).toEqual(new Map([["A", 3]]))
    // Organization B is within its share: its delivery still starts at once.
    expect(admission.admit("b1", "B")).toBe(true)
    // Room again in A, but its queued row is older: A's next one queues behind it until a short lease.
    admission.finished(owned("a1", "A"))
    expect(admission.admit("a5", "A")).toBe(false)
    admission.leased(1, [])
    expect(admission.admit("a5", "A")).toBe(false)
    admission.finished(owned("a2", "A"))
    admission.leased(2, [])
    expect(admission.admit("a5", "A")).toBe(true)
  })

  it("an organization past its share takes idle slots while a quarter of all slots stays free", () => {
    const admission = cleared({ concurrency: 8, perWebhook: 8, perOrganization: 3 })
    // Alone, A passes its share of three up to six attempts: two of the eight slots stay free.
    expect(Array.from({ length: 7 }, (_, i) => admission.admit(`a${i}`, "A"))).toEqual([
      true,
      true,
      true,
      true,
      true,
      true,
      false
    ])
    expect(admission.overShareRoom()).toBe(0)
    // The free quarter is for organizations within their share.
    expect([admission.admit("b1", "B"), admission.admit("b2", "B")]).toEqual([true, true])
    admission.finished(owned("a0", "A"))
    expect(admission.overShareRoom()).toBe(0)
    // A short lease at seven in flight (past six): A, at its share then, may have rows waiting.
    admission.leased(1, [])
    expect(admission.admit("a7", "A")).toBe(false)
    // Below six after a short lease: A had nothing left waiting, and takes an idle slot again.
    admission.finished(owned("a1", "A"))
    admission.finished(owned("a2", "A"))
    admission.leased(3, [])
    expect(admission.overShareRoom()).toBe(1)
    expect(admission.admit("a7", "A")).toBe(true)
  })

  it("at its share after a lease with slots scarce, an organization counts as behind only if a row of it was queued for want of its room since", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4, perOrganization: 2 })
    // Alone, A passes its share of two up to three attempts (a quarter of the four slots stays free).
    expect(["a1", "a2", "a3"].map((webhookId) => admission.admit(webhookId, "A"))).toEqual([true, true, true])
    // A short lease with A at its share and slots scarce: nothing of A was queued here, so A goes on.
    admission.leased(1, [])
    admission.finished(owned("a1", "A"))
    expect(admission.admit("a4", "A")).toBe(true)
    // A row queued for want of A's room keeps A's later rows queued through a lease at its share.
    expect(admission.admit("a5", "A")).toBe(false)
    admission.leased(1, [])
    admission.finished(owned("a2", "A"))
    expect(admission.admit("a6", "A")).toBe(false)
    // Below the limit after a short lease, A left nothing waiting.
    admission.finished(owned("a3", "A"))
    admission.leased(3, [])
    expect(admission.admit("a6", "A")).toBe(true)
  })
})

describe("deep hand-off for quick receivers", () => {
  const limits = { concurrency: 16, perWebhook: 2, perOrganization: 16 }
  const deepShares = { concurrency: 32, perWebhook: 8, perOrganization: 32 }
  /** An admission whose first lease came back short, with webhooks in `quick` taken as quick. */
  const deepCleared = (quick: ReadonlySet<string>) => {
    const admission = makeAdmission(limits, { shares: deepShares, quick: (webhookId) => quick.has(webhookId) })
    admission.leased(limits.concurrency, [])
    return admission
  }

  it("a quick webhook's rows are handed over up to the deeper share; another's up to the lease's", () => {
    const admission = deepCleared(new Set(["quick"]))
    expect(Array.from({ length: 9 }, () => admission.admit("quick", "org"))).toEqual([
      ...Array.from({ length: 8 }, () => true),
      false
    ])
    expect(Array.from({ length: 3 }, () => admission.admit("slow", "org"))).toEqual([true, true, false])
    expect(admission.running()).toBe(10)
  })

  it("the rows handed over for quick webhooks leave the lease's room to the other webhooks; leased rows fill it", () => {
    const admission = deepCleared(new Set(["q1", "q2"]))
    for (const quick of ["q1", "q2"]) {
      for (let i = 0; i < 8; i++) expect(admission.admit(quick, "org")).toBe(true)
    }
    // Sixteen rows held, as many as the lease's room. Another webhook's rows are still handed over
    // within its share, and none queued for want of room overall, so a third webhook's row skips the
    // queue too (before, the quick rows filled the room: the first was queued, and every row after it).
    expect(admission.running()).toBe(16)
    expect([admission.admit("slow", "org"), admission.admit("slow", "org"), admission.admit("slow", "org")])
      .toEqual([true, true, false])
    expect(admission.admit("other", "org")).toBe(true)
    // Leased rows count against the room: 3 handed over and 13 leased fill it.
    admission.leased(16, Array.from({ length: 13 }, (_, i) => owned(`leased${i}`)))
    expect(admission.admit("late", "org")).toBe(false)
    expect(admission.running()).toBe(32)
  })

  it("at the lease's share after a lease, a quick webhook counts as behind only if a row of it was queued since", () => {
    const admission = deepCleared(new Set(["quick"]))
    for (let i = 0; i < 5; i++) expect(admission.admit("quick", "org")).toBe(true)
    expect([admission.admit("slow", "org"), admission.admit("slow", "org")]).toEqual([true, true])
    // A short lease, both past the lease's share of two: the lease took none of their rows.
    admission.leased(3, [])
    admission.finished(owned("slow"))
    // The other webhook may have rows waiting; the quick one had none queued here, and goes on.
    expect(admission.admit("slow", "org")).toBe(false)
    expect(admission.admit("quick", "org")).toBe(true)
    // A quick row refused (at the deeper share of eight) keeps its later ones queued: through a lease
    // that finds it past the lease's share, until a short lease finds it below that share.
    expect([admission.admit("quick", "org"), admission.admit("quick", "org"), admission.admit("quick", "org")])
      .toEqual([true, true, false])
    admission.finished(owned("quick"))
    admission.leased(3, [])
    expect(admission.admit("quick", "org")).toBe(false)
    for (let i = 0; i < 6; i++) admission.finished(owned("quick"))
    admission.leased(3, [])
    expect(admission.admit("quick", "org")).toBe(true)
  })

  it("a receiver is quick once its attempts' moving average is within half the margin over the hand-off's depth", () => {
    // A margin of 32 s and a depth of 32: quick up to 500 ms on average.
    const pace = makeReceiverPace(32_000)
    expect(pace.quick("a")).toBe(false)
    pace.ended("a", 400)
    expect(pace.quick("a")).toBe(true)
    // One slow attempt weighs an eighth: 400 + (10,000 - 400) / 8 = 1,600 ms.
    pace.ended("a", 10_000)
    expect(pace.quick("a")).toBe(false)
    // Quick again after enough quick ones: each takes an eighth of the distance to 0.
    for (let i = 0; i < 9; i++) pace.ended("a", 0)
    expect(pace.quick("a")).toBe(true)
    expect(pace.quick("b")).toBe(false)
    expect(HANDOFF_DEPTH).toBe(32)
  })
})

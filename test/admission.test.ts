/**
 * The hand-off rule (Admission.ts): a new delivery skips the queue only when it overtakes nothing
 * this process knows to be queued and fits within the concurrency overall and its webhook's share.
 */
import { describe, expect, it } from "@effect/vitest"
import { makeAdmission } from "../src/Delivery/Admission.js"

/** An admission whose first lease came back short, as the dispatcher's first round does on an empty queue. */
const cleared = (limits: { readonly concurrency: number; readonly perWebhook: number }) => {
  const admission = makeAdmission(limits)
  admission.leased(limits.concurrency, [])
  return admission
}

describe("admission", () => {
  it("nothing skips the queue until a lease has come back short; a lease that asked nothing tells nothing", () => {
    const admission = makeAdmission({ concurrency: 4, perWebhook: 2 })
    expect(admission.queueEmpty()).toBe(false)
    expect(admission.admit("a")).toBe(false)
    admission.leased(0, [])
    expect(admission.admit("b")).toBe(false)
    admission.leased(4, ["a"])
    expect(admission.queueEmpty()).toBe(true)
    expect(admission.admit("b")).toBe(true)
    expect(admission.running()).toBe(2)
    expect(admission.inFlight()).toEqual(new Map([["a", 1], ["b", 1]]))
  })

  it("a webhook is admitted up to its share; a row queued then keeps its later rows queued until a short lease finds the webhook below its share", () => {
    const admission = cleared({ concurrency: 10, perWebhook: 2 })
    expect([admission.admit("a"), admission.admit("a"), admission.admit("a")]).toEqual([true, true, false])
    expect(admission.queueEmpty()).toBe(false)
    // Room again, but the queued row is older: the next one queues behind it.
    admission.finished("a")
    expect(admission.admit("a")).toBe(false)
    // Other webhooks are not held back.
    expect(admission.admit("b")).toBe(true)
    // The lease takes a's queued rows up to its share: a may still have rows waiting.
    admission.leased(7, ["a"])
    admission.finished("a")
    expect(admission.admit("a")).toBe(false)
    // A short lease with a below its share: a has nothing waiting.
    admission.leased(7, [])
    expect(admission.admit("a")).toBe(true)
  })

  it("once a row queues for want of room overall, no webhook skips the queue until a lease comes back short", () => {
    const admission = cleared({ concurrency: 2, perWebhook: 2 })
    expect([admission.admit("a"), admission.admit("b"), admission.admit("c")]).toEqual([true, true, false])
    admission.finished("a")
    expect(admission.admit("d")).toBe(false)
    admission.leased(1, [])
    expect(admission.admit("d")).toBe(true)
  })

  it("a full lease may leave due rows, so the hand-off waits for a short one", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4 })
    admission.leased(2, ["a", "b"])
    expect(admission.queueEmpty()).toBe(false)
    expect(admission.admit("c")).toBe(false)
    admission.leased(2, ["a"])
    expect(admission.admit("c")).toBe(true)
  })

  it("once closed nothing is admitted, and attempts are counted until they finish", () => {
    const admission = cleared({ concurrency: 4, perWebhook: 4 })
    expect(admission.admit("a")).toBe(true)
    admission.close()
    expect(admission.admit("b")).toBe(false)
    expect(admission.running()).toBe(1)
    admission.finished("a")
    expect(admission.running()).toBe(0)
    expect(admission.inFlight()).toEqual(new Map())
  })
})

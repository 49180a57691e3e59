/**
 * The fairness rule itself (src/Delivery/Fairness.ts), pure: the shares the hand-off (Admission.ts)
 * and the lease (Lease.ts) both apply. Its effect through the whole hub is test/fairness.test.ts's.
 */
import { describe, expect, it } from "@effect/vitest"
import {
  anyAtShare,
  atShare,
  countDown,
  countUp,
  type DueRow,
  overShareLimit,
  pickWithinShares,
  pipelineDepth,
  pipelineShares,
  roomFor,
  rowsLeft,
  withAttempts
} from "../src/Delivery/Fairness.js"

const counts = (entries: Record<string, number>) => new Map(Object.entries(entries))

/** A due row of webhook `webhook_id` of organization `organization_id`, first attempts unless `phase` is 1. */
const due = (id: string, webhook_id: string, organization_id: string, next_attempt_at: string, phase = 0): DueRow => ({
  id,
  webhook_id,
  organization_id,
  phase,
  next_attempt_at
})

describe("fairness rule", () => {
  it("a quarter of all slots (rounded up) stays free for organizations within their share", () => {
    expect([1, 4, 8, 10, 64].map(overShareLimit)).toEqual([0, 3, 6, 7, 48])
  })

  it("counts go up and down, a key at zero gone; atShare and anyAtShare find the keys at their share", () => {
    const byWebhook = new Map<string, number>()
    countUp(byWebhook, "a")
    countUp(byWebhook, "a")
    countUp(byWebhook, "b")
    expect(atShare(byWebhook, 2)).toEqual(["a"])
    countDown(byWebhook, "b")
    expect(byWebhook.has("b")).toBe(false)
    expect(anyAtShare({ byWebhook, byOrganization: new Map() }, { perWebhook: 3, perOrganization: 3 })).toBe(false)
    expect(anyAtShare({ byWebhook, byOrganization: counts({ A: 3 }) }, { perWebhook: 3, perOrganization: 3 })).toBe(
      true
    )
  })

  it("withAttempts adds deliveries to copies of the counts", () => {
    const inFlight = { byWebhook: counts({ a: 1 }), byOrganization: counts({ A: 1 }) }
    const added = withAttempts(inFlight, [{ webhook_id: "a", organization_id: "A" }, {
      webhook_id: "b",
      organization_id: "B"
    }])
    expect(added).toEqual({ byWebhook: counts({ a: 2, b: 1 }), byOrganization: counts({ A: 2, B: 1 }) })
    expect(inFlight.byWebhook.get("a")).toBe(1)
  })

  it("room for one more attempt: overall, within the webhook's share, within the organization's or the idle slots past it", () => {
    const shares = { concurrency: 8, perWebhook: 2, perOrganization: 4 }
    const inFlight = { byWebhook: counts({ a1: 2, a2: 2 }), byOrganization: counts({ A: 4 }) }
    // Below the over-share limit (6 of 8), an organization past its share may still start one.
    expect(roomFor(shares, 4, inFlight, { webhook_id: "a3", organization_id: "A" })).toEqual({
      overall: true,
      organization: true,
      owner: true
    })
    // A webhook at its share has no room, whatever its organization's.
    expect(roomFor(shares, 4, inFlight, { webhook_id: "a1", organization_id: "A" })).toEqual({
      overall: true,
      organization: true,
      owner: false
    })
    // At the limit, the organization's share binds; another organization is not held back.
    expect(roomFor(shares, 6, inFlight, { webhook_id: "a3", organization_id: "A" })).toEqual({
      overall: true,
      organization: false,
      owner: false
    })
    expect(roomFor(shares, 6, inFlight, { webhook_id: "b1", organization_id: "B" })).toEqual({
      overall: true,
      organization: true,
      owner: true
    })
    expect(roomFor(shares, 8, inFlight, { webhook_id: "b1", organization_id: "B" }).overall).toBe(false)
  })

  it("rows left for a webhook: its share's rest, bounded by its organization's rest or the idle slots past it", () => {
    const shares = { perWebhook: 4, perOrganization: 5 }
    const inFlight = { byWebhook: counts({ a1: 1 }), byOrganization: counts({ A: 4 }) }
    expect(rowsLeft(shares, inFlight, 0, { webhook_id: "a1", organization_id: "A" })).toBe(1)
    expect(rowsLeft(shares, inFlight, 2, { webhook_id: "a1", organization_id: "A" })).toBe(2)
    expect(rowsLeft(shares, inFlight, 9, { webhook_id: "a1", organization_id: "A" })).toBe(3)
    expect(rowsLeft(shares, inFlight, 0, { webhook_id: "b1", organization_id: "B" })).toBe(4)
  })

  it("picks in due order, first attempts before retries, each webhook within its share, ids once", () => {
    const rows = [
      due("r1", "a", "A", "2026-01-01T00:00:00.000Z", 1),
      due("p2", "a", "A", "2026-01-01T00:00:02.000Z"),
      due("p1", "a", "A", "2026-01-01T00:00:01.000Z"),
      due("p1", "a", "A", "2026-01-01T00:00:01.000Z"),
      due("p3", "a", "A", "2026-01-01T00:00:03.000Z"),
      due("q1", "b", "A", "2026-01-01T00:00:04.000Z")
    ]
    const { overShare, picked } = pickWithinShares(rows, {
      limit: 10,
      perWebhook: 3,
      perOrganization: 10,
      overShareRoom: 0,
      byWebhook: counts({ a: 1 }),
      byOrganization: counts({ A: 1 })
    })
    expect(picked.map((row) => row.id)).toEqual(["p1", "p2", "q1"])
    expect(overShare).toBe(0)
  })

  it("organizations within their share go first; past it, only up to the idle slots, in due order", () => {
    const rows = [
      due("a1", "wa", "A", "2026-01-01T00:00:01.000Z"),
      due("a2", "wa2", "A", "2026-01-01T00:00:02.000Z"),
      due("a3", "wa3", "A", "2026-01-01T00:00:03.000Z"),
      due("b1", "wb", "B", "2026-01-01T00:00:04.000Z")
    ]
    const request = {
      limit: 10,
      perWebhook: 5,
      perOrganization: 1,
      byWebhook: new Map<string, number>(),
      byOrganization: new Map<string, number>()
    }
    expect(pickWithinShares(rows, { ...request, overShareRoom: 0 }).picked.map((row) => row.id)).toEqual(["a1", "b1"])
    const past = pickWithinShares(rows, { ...request, overShareRoom: 1 })
    expect(past.picked.map((row) => row.id)).toEqual(["a1", "b1", "a2"])
    expect(past.overShare).toBe(1)
    expect(pickWithinShares(rows, { ...request, limit: 1, overShareRoom: 3 }).picked.map((row) => row.id)).toEqual([
      "a1"
    ])
  })
})

describe("leasing ahead", () => {
  it("leases as far ahead as a row can wait behind attempts taking the whole timeout and still start within its lease's margin", () => {
    // The defaults, a 10 s timeout and a 30 s margin: three rounds of attempts ahead, four times the shares.
    expect(pipelineDepth(10_000, 30_000)).toBe(4)
    expect(pipelineDepth(15_000, 30_000)).toBe(3)
    expect(pipelineDepth(30_000, 30_000)).toBe(2)
    // A margin shorter than the timeout: no room ahead of the shares.
    expect(pipelineDepth(60_000, 30_000)).toBe(1)
    // Never more than four, however short the timeout.
    expect(pipelineDepth(100, 30_000)).toBe(4)
    expect(pipelineShares({ concurrency: 256, perWebhook: 32, perOrganization: 128 }, 4)).toEqual({
      concurrency: 1024,
      perWebhook: 128,
      perOrganization: 512
    })
  })
})

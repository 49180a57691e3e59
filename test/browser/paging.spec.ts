/**
 * The dashboard's paging (src/Dashboard/ui/paging.ts) on its own: how a place becomes an API query
 * and a page's own query, how Next and Previous follow the answer's cursors, and a capped total
 * shown as a lower bound. The browser tests walk real pages; these pin the rules (a total of more
 * than 10,000 rows is out of their reach).
 */
import { describe, expect, it } from "vitest"
import {
  countText,
  FIRST_PAGE,
  newerPage,
  olderPage,
  pageQuery,
  pageText,
  placeOf,
  placeParams
} from "../../src/Dashboard/ui/paging.js"

describe("dashboard paging", () => {
  it("asks for an offset page without a cursor, and for a cursor without a page (the API refuses both)", () => {
    expect(pageQuery(FIRST_PAGE)).toEqual({ page: 1 })
    expect(pageQuery({ position: 3, cursor: undefined })).toEqual({ page: 3 })
    expect(pageQuery({ position: 3, cursor: { before: "b" } })).toEqual({ before: "b" })
    expect(pageQuery({ position: 2, cursor: { after: "a" } })).toEqual({ after: "a" })
  })

  it("Next follows cursors.before until it is null; Previous follows cursors.after, and from the second page goes to the plain first", () => {
    const second = olderPage(FIRST_PAGE, { before: "b1", after: "a1" })
    expect(second).toEqual({ position: 2, cursor: { before: "b1" } })
    expect(olderPage(FIRST_PAGE, { before: null, after: "a1" })).toBeUndefined()
    const third = { position: 3, cursor: { before: "b2" } } as const
    expect(newerPage(third, { before: "b3", after: "a3" })).toEqual({ position: 2, cursor: { after: "a3" } })
    expect(newerPage({ position: 2, cursor: { before: "b1" } }, { before: "b2", after: "a2" })).toEqual(FIRST_PAGE)
    expect(newerPage(FIRST_PAGE, { before: "b1", after: "a1" })).toBeUndefined()
  })

  it("keeps a place in the page's own query and reads it back; old offset links still work", () => {
    for (
      const place of [FIRST_PAGE, { position: 4, cursor: { before: "Yg" } }, { position: 2, cursor: { after: "YQ" } }, {
        position: 3,
        cursor: undefined
      }]
    ) {
      const query = new URLSearchParams()
      for (const [name, value] of Object.entries(placeParams(place))) {
        if (value !== undefined) query.set(name, String(value))
      }
      expect(placeOf(query)).toEqual(place)
    }
    expect(placeOf(new URLSearchParams("page=x"))).toEqual(FIRST_PAGE)
    // A cursor is never the first page: its place is at least the second.
    expect(placeOf(new URLSearchParams("before=Yg"))).toEqual({ position: 2, cursor: { before: "Yg" } })
  })

  it("shows a capped total as a lower bound, an exact one with its page count", () => {
    expect(countText(10_000, true)).toBe("10,000+")
    expect(countText(1234, false)).toBe("1,234")
    expect(
      pageText({ position: 7, cursor: { before: "b" } }, { total: 10_000, limit: 50, total_capped: true }, [
        "message",
        "messages"
      ])
    ).toBe("Page 7 · 10,000+ messages")
    expect(pageText(FIRST_PAGE, { total: 87, limit: 20 }, ["message", "messages"])).toBe("Page 1 of 5 · 87 messages")
    expect(pageText(FIRST_PAGE, { total: 1, limit: 20 }, ["message", "messages"])).toBe("Page 1 of 1 · 1 message")
    expect(pageText(FIRST_PAGE, { total: 0, limit: 20 }, ["delivery", "deliveries"])).toBe("Page 1 of 1 · 0 deliveries")
  })
})

/**
 * Paging of the hub's lists (message history, delivery logs) as the dashboard walks them. The first
 * page is the plain newest page; Next follows the answer's `cursors.before` and Previous its
 * `cursors.after`, so a step never counts the rows it skips (offset paging stops 10,000 rows deep)
 * and never shows a row twice when new ones arrive meanwhile. The position is the dashboard's own
 * count of steps, shown as the page number; Previous to the first page asks for the plain newest
 * page again rather than a cursor. Pure: no DOM, so it is tested on its own.
 */
import type { PageCursors } from "./types.js"

type PageCursor = { readonly before: string } | { readonly after: string }

export interface PagePlace {
  /** The page number shown: 1 for the newest page. */
  readonly position: number
  /** How the page is asked for: by a cursor, or (without one) as the offset page `position`. */
  readonly cursor: PageCursor | undefined
}

export const FIRST_PAGE: PagePlace = { position: 1, cursor: undefined }

/** The API query of a place: `page` for an offset page, else the cursor alone (the API refuses both). */
export const pageQuery = (place: PagePlace): Readonly<Record<string, string | number>> =>
  place.cursor === undefined ? { page: place.position } : { ...place.cursor }

/** The next, older page; undefined when the answer says none may follow. */
export const olderPage = (place: PagePlace, cursors: PageCursors): PagePlace | undefined =>
  cursors.before === null ? undefined : { position: place.position + 1, cursor: { before: cursors.before } }

/** The previous, newer page; undefined on the first. The second page's previous is the plain first page. */
export const newerPage = (place: PagePlace, cursors: PageCursors): PagePlace | undefined => {
  if (place.position <= 1) return undefined
  if (place.position === 2 || cursors.after === null) return FIRST_PAGE
  return { position: place.position - 1, cursor: { after: cursors.after } }
}

const wholeNumber = (text: string | null) => {
  const n = Number(text)
  return Number.isInteger(n) && n > 0 ? n : undefined
}

/** A place from a page's own query (`page`, and `before` or `after`), so a paged view can be linked. */
export const placeOf = (query: URLSearchParams): PagePlace => {
  const before = query.get("before")
  const after = query.get("after")
  const position = wholeNumber(query.get("page")) ?? 1
  if (before !== null && before !== "") return { position: Math.max(2, position), cursor: { before } }
  if (after !== null && after !== "") return { position: Math.max(2, position), cursor: { after } }
  return { position, cursor: undefined }
}

/** A place as a page's own query (the first page adds nothing). */
export const placeParams = (place: PagePlace): Readonly<Record<string, string | number | undefined>> =>
  place.cursor === undefined
    ? { page: place.position === 1 ? undefined : place.position }
    : { page: place.position, ...place.cursor }

const counts = new Intl.NumberFormat("en")

/** A count as the hub knows it: exact, or a lower bound ("10,000+") when the total is capped. */
export const countText = (count: number, capped: boolean) => `${counts.format(count)}${capped ? "+" : ""}`

/** "Page 2 of 5 · 87 messages", or "Page 2 · 10,000+ messages" when the total is a lower bound. */
export const pageText = (
  place: PagePlace,
  list: { readonly total: number; readonly limit: number; readonly total_capped?: boolean | undefined },
  noun: readonly [string, string]
) => {
  const capped = list.total_capped === true
  const name = list.total === 1 && !capped ? noun[0] : noun[1]
  if (capped) return `Page ${place.position} · ${countText(list.total, true)} ${name}`
  const pages = Math.max(1, Math.ceil(list.total / list.limit))
  return `Page ${place.position} of ${Math.max(pages, place.position)} · ${countText(list.total, false)} ${name}`
}

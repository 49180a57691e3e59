/**
 * Paging of the hub's own lists (message history, delivery logs), newest first by (created_at, id).
 * Every list request must stay cheap at millions of rows, so:
 * - offset paging (`page`, `limit`) reaches at most MAX_OFFSET rows deep; further on, keyset cursors
 *   (`before`, `after`) continue from a row instead of counting rows to skip;
 * - a total that no kept count answers is counted up to COUNT_CAP and flagged `total_capped` beyond;
 * - a filter no index serves examines at most SCAN_WINDOW rows per request, and the `before` cursor
 *   then continues from the last row examined.
 */
import { Either, ParseResult, Schema } from "effect"
import { type BadRequest, invalidField } from "./Errors.js"

/** Deepest row offset paging reaches: (page - 1) × limit. */
export const MAX_OFFSET = 10_000

/** Most rows a capped total counts; beyond it the total is this and `total_capped` is true. */
export const COUNT_CAP = 10_000

/** Most rows one request examines for a filter that no index serves (see the module comment). */
export const SCAN_WINDOW = 20_000

/** A row's place in the newest-first order. */
export interface Keyset {
  readonly createdAt: string
  readonly id: string
}

const SEPARATOR = "|"

export const encodeCursor = (at: Keyset): string =>
  Buffer.from(`${at.createdAt}${SEPARATOR}${at.id}`).toString("base64url")

const cursorRule = "must be a cursor from an earlier answer's cursors.before or cursors.after"

/** A cursor as it travels: opaque base64url text naming a row's created_at and id. */
export const Cursor = Schema.transformOrFail(
  Schema.String,
  Schema.Struct({ createdAt: Schema.String, id: Schema.String }),
  {
    strict: true,
    decode: (text, _, ast) => {
      const decoded = /^[A-Za-z0-9_-]{1,400}$/.test(text) ? Buffer.from(text, "base64url").toString("utf8") : ""
      const at = decoded.indexOf(SEPARATOR)
      const createdAt = decoded.slice(0, at)
      const id = decoded.slice(at + 1)
      return at > 0 && id !== "" && !Number.isNaN(Date.parse(createdAt))
        ? ParseResult.succeed({ createdAt, id })
        : ParseResult.fail(new ParseResult.Type(ast, text, cursorRule))
    },
    encode: (keyset) => ParseResult.succeed(encodeCursor(keyset))
  }
).annotations({ description: "An opaque cursor from an earlier answer's `cursors`" })

/** Where the next pages are: `before` continues to older rows (null when none may follow), `after` to newer ones. */
export const Cursors = Schema.Struct({
  before: Schema.NullOr(Schema.String).annotations({
    description: "Pass as `before` for the next older page; null when no older row may follow"
  }),
  after: Schema.NullOr(Schema.String).annotations({
    description: "Pass as `after` for rows newer than this page (to poll for new ones); null on an empty first page"
  })
})

/** The envelope fields every paged list adds to the spec's `data`, `total`, `page`, `limit`. */
export const PageFields = {
  total_capped: Schema.optional(Schema.Boolean).annotations({
    description:
      `True when the total is a lower bound: more than ${COUNT_CAP} rows match, or a filter looked through ${SCAN_WINDOW} rows without reaching the end`
  }),
  cursors: Cursors
}

/** What a page request asks, once checked: an offset page, or the rows on one side of a cursor. */
export type PageRequest =
  | { readonly _tag: "Offset"; readonly offset: number; readonly limit: number }
  | { readonly _tag: "Before" | "After"; readonly at: Keyset; readonly limit: number }

/** Checks page, limit and cursors together: one cursor at most, no cursor beyond page 1, offsets within MAX_OFFSET. */
export const pageRequest = (query: {
  readonly page: number
  readonly limit: number
  readonly before?: Keyset | undefined
  readonly after?: Keyset | undefined
}): Either.Either<PageRequest, BadRequest> => {
  const { after, before, limit, page } = query
  if (before !== undefined && after !== undefined) {
    return Either.left(invalidField("after", "give either before or after, not both"))
  }
  const cursor = before ?? after
  if (cursor !== undefined) {
    return page > 1
      ? Either.left(
        invalidField("page", "must be 1 (or absent) with a cursor: a cursor already says where the page starts")
      )
      : Either.right({ _tag: before !== undefined ? "Before" : "After", at: cursor, limit })
  }
  const offset = (page - 1) * limit
  return offset > MAX_OFFSET
    ? Either.left(invalidField(
      "page",
      `page × limit may reach at most ${MAX_OFFSET} rows deep; continue with the before cursor of the last answer (cursors.before), or narrow the range with date filters`,
      "page_too_deep"
    ))
    : Either.right({ _tag: "Offset", offset, limit })
}

/** The cursors of an answered page (rows newest first); `more` says whether older rows may follow the page. */
export const cursorsOf = (
  rows: ReadonlyArray<{ readonly created_at: string; readonly id: string }>,
  more: Keyset | undefined,
  request: PageRequest
): typeof Cursors.Type => {
  const first = rows[0]
  return {
    before: more === undefined ? null : encodeCursor(more),
    after: first !== undefined
      ? encodeCursor({ createdAt: first.created_at, id: first.id })
      : request._tag === "Offset"
      ? null
      : encodeCursor(request.at)
  }
}

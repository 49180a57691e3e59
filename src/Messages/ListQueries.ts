/**
 * The message history's queries (GET /api/messages), each bounded whatever the number of records
 * (see Domain/Paging.ts): the page walks one index range newest first and stops at its LIMIT; a
 * status filter has its own index (migrations 0008 and 0011), an upstream id is a seek per instance,
 * dates are ranges of either index; `direction` and `status=pending` are served by no index (pending
 * records are left out of the status index to spare every send), so a page filtered by them examines
 * at most SCAN_WINDOW records. Plans are checked in test/messages-list.test.ts.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { InstanceId, OrganizationId } from "../Domain/Ids.js"
import { COUNT_CAP, type Keyset, type PageRequest, SCAN_WINDOW } from "../Domain/Paging.js"
import {
  type Direction,
  directions,
  failureReasons,
  type MessageStatus,
  messageStatuses,
  priorities
} from "../Domain/Vocabulary.js"
import { decodeRows, SqlCount } from "../Sql/RowSchemas.js"
import { sendEndpoints } from "../Upstream/Upstream.js"
import { identifiersOf } from "./Identities.js"

/** A message record as read: its direction, status and endpoint are the hub's words (Domain/Vocabulary.ts). */
export const MessageRow = Schema.Struct({
  id: Schema.String,
  organization_id: OrganizationId,
  instance_id: InstanceId,
  direction: Schema.Literal(...directions),
  wa_message_id: Schema.NullOr(Schema.String),
  to_number: Schema.NullOr(Schema.String),
  from_number: Schema.NullOr(Schema.String),
  type: Schema.String,
  status: Schema.Literal(...messageStatuses),
  error: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  /** When the current status was reached; and each step's time, when the hub saw it (migration 0013). */
  status_at: Schema.NullOr(Schema.String),
  sent_at: Schema.NullOr(Schema.String),
  delivered_at: Schema.NullOr(Schema.String),
  read_at: Schema.NullOr(Schema.String),
  failed_at: Schema.NullOr(Schema.String),
  /** The other party's BSUID, parent BSUID and username, and the send's category, when known (migration 0016). */
  user_id: Schema.NullOr(Schema.String),
  parent_user_id: Schema.NullOr(Schema.String),
  username: Schema.NullOr(Schema.String),
  category: Schema.NullOr(Schema.String),
  /** The Graph endpoint that carried a send, and where a record came from when not a send or the `messages` field. */
  endpoint: Schema.NullOr(Schema.Literal(...sendEndpoints)),
  origin: Schema.NullOr(Schema.String),
  failure_reason: Schema.NullOr(Schema.Literal(...failureReasons)),
  send_at: Schema.NullOr(Schema.String),
  expires_at: Schema.NullOr(Schema.String),
  priority: Schema.NullOr(Schema.Literal(...priorities))
})
export type MessageRow = typeof MessageRow.Type

/** Decodes message records as read (the list's page, one record). */
export const messageRows = decodeRows(MessageRow)

/** The list's total: sums and counts, bigints (text) on PostgreSQL. */
const totalRows = decodeRows(Schema.Struct({ total: SqlCount, examined: SqlCount }))

export const messageColumns =
  "id, organization_id, instance_id, direction, wa_message_id, to_number, from_number, type, status, error, created_at, status_at, sent_at, delivered_at, read_at, failed_at, " +
  "user_id, parent_user_id, username, category, endpoint, origin, failure_reason, send_at, expires_at, priority"

export interface ListFilter {
  readonly organizationId: OrganizationId
  /** One instance of the organization (the caller checked it is), or all of them when undefined. */
  readonly instanceId: InstanceId | undefined
  readonly status: MessageStatus | undefined
  readonly direction: Direction | undefined
  readonly waMessageId: string | undefined
  /** One person's records: their number or business-scoped user id, and every identifier paired with it (Identities.ts). */
  readonly user?: string | undefined
  /** Inclusive lower bound on created_at (ISO 8601). */
  readonly createdFrom: string | undefined
  /** Upper bound on created_at: inclusive for a timestamp, exclusive for the day after a bare date. */
  readonly createdUntil: { readonly at: string; readonly inclusive: boolean } | undefined
  readonly page: PageRequest
}

/** A page of records, newest first, and where older ones may follow (undefined: none may). */
export interface ListPage {
  readonly rows: ReadonlyArray<MessageRow>
  readonly more: Keyset | undefined
  readonly total: number
  readonly totalCapped: boolean
}

/**
 * The queries of a page; `parties` are the identifiers of `filter.user`'s person (default: the one
 * given). A person's records are read through the party index (migration 0017); a person known by
 * several identifiers has their records sorted, a cost bounded by their own history.
 */
export const listQueries = (
  sql: SqlClient.SqlClient,
  filter: ListFilter,
  parties: ReadonlyArray<string> | undefined = filter.user === undefined ? undefined : [filter.user]
) => {
  const { page } = filter
  // With an instance only `instance_id` is matched (the caller resolved it within the organization):
  // a second column outside the index would cost a row lookup per record. A person's records are
  // found by the party index, and only then matched to the instance: `instance_id || ''` keeps
  // the planner from walking the instance's whole history instead.
  const scope = parties !== undefined && filter.waMessageId === undefined
    ? sql.and([
      sql`organization_id = ${filter.organizationId}`,
      sql`COALESCE(to_number, from_number) IN ${sql.in(parties)}`,
      ...(filter.instanceId === undefined ? [] : [sql`instance_id || '' = ${filter.instanceId}`])
    ])
    : filter.waMessageId !== undefined
    ? filter.instanceId === undefined
      ? sql`instance_id IN (SELECT id FROM instances WHERE organization_id = ${filter.organizationId}) AND wa_message_id = ${filter.waMessageId}`
      : sql`instance_id = ${filter.instanceId} AND wa_message_id = ${filter.waMessageId}`
    : filter.instanceId === undefined
    ? sql`organization_id = ${filter.organizationId}`
    : sql`instance_id = ${filter.instanceId}`
  // The status index leaves out pending records: a query uses it only when it repeats that condition.
  const indexedStatus = filter.status !== undefined && filter.status !== "pending"
    ? [sql`status = ${filter.status}`, "status <> 'pending'"]
    : []
  const indexed = [
    scope,
    ...indexedStatus,
    ...(filter.createdFrom === undefined ? [] : [sql`created_at >= ${filter.createdFrom}`]),
    ...(filter.createdUntil === undefined
      ? []
      : [
        filter.createdUntil.inclusive
          ? sql`created_at <= ${filter.createdUntil.at}`
          : sql`created_at < ${filter.createdUntil.at}`
      ])
  ]
  // The plain bound on created_at makes the cursor an index range (the OR alone is only a filter, so
  // a deep cursor would walk every newer record); the OR then orders ties by id.
  const keyset = page._tag === "Before"
    ? [
      sql`created_at <= ${page.at.createdAt}`,
      sql`(created_at < ${page.at.createdAt} OR (created_at = ${page.at.createdAt} AND id < ${page.at.id}))`
    ]
    : page._tag === "After"
    ? [
      sql`created_at >= ${page.at.createdAt}`,
      sql`(created_at > ${page.at.createdAt} OR (created_at = ${page.at.createdAt} AND id > ${page.at.id}))`
    ]
    : []
  // A lookup by upstream id reads a row per instance at most: everything else filters those.
  const residualMatch = [
    ...(parties !== undefined && filter.waMessageId !== undefined
      ? [sql`COALESCE(to_number, from_number) IN ${sql.in(parties)}`]
      : []),
    ...(filter.status === "pending" ? [sql`status = ${filter.status}`] : []),
    ...(filter.direction === undefined ? [] : [sql`direction = ${filter.direction}`])
  ]
  const residual = residualMatch.length > 0 && filter.waMessageId === undefined
  const order = sql.literal(page._tag === "After" ? "ORDER BY created_at, id" : "ORDER BY created_at DESC, id DESC")
  const offset = page._tag === "Offset" ? page.offset : 0
  // One row more than the page says whether more may follow it.
  const take = page.limit + 1
  const pageQuery = residual
    ? sql`SELECT ${sql.literal(messageColumns)} FROM (
        SELECT ${sql.literal(messageColumns)} FROM messages WHERE ${
      sql.and([...indexed, ...keyset])
    } ${order} LIMIT ${SCAN_WINDOW}
      ) AS examined WHERE ${sql.and(residualMatch)} ${order} LIMIT ${take} OFFSET ${offset}`
    : sql`SELECT ${sql.literal(messageColumns)} FROM messages WHERE ${
      sql.and([...indexed, ...keyset, ...residualMatch])
    }
      ${order} LIMIT ${take} OFFSET ${offset}`
  /** The last record a residual page examined, when it examined a whole window: older matches may lie past it. */
  const windowEnd = sql<{ readonly created_at: string; readonly id: string }>`SELECT created_at, id FROM messages
    WHERE ${sql.and([...indexed, ...keyset])} ${order} LIMIT 1 OFFSET ${SCAN_WINDOW - 1}`
  const unfiltered = parties === undefined && filter.status === undefined && filter.direction === undefined &&
    filter.waMessageId === undefined &&
    filter.createdFrom === undefined && filter.createdUntil === undefined
  const total = unfiltered
    ? filter.instanceId === undefined
      ? sql`SELECT COALESCE(SUM(total), 0) AS total, 0 AS examined FROM message_counts WHERE organization_id = ${filter.organizationId}`
      : sql`SELECT COALESCE(SUM(total), 0) AS total, 0 AS examined FROM message_counts WHERE instance_id = ${filter.instanceId}`
    : residual
    ? sql`SELECT COALESCE(SUM(CASE WHEN ${sql.and(residualMatch)} THEN 1 ELSE 0 END), 0) AS total, COUNT(*) AS examined
        FROM (SELECT direction, status FROM messages WHERE ${
      sql.and(indexed)
    } ORDER BY created_at DESC, id DESC LIMIT ${SCAN_WINDOW}) AS examined`
    : sql`SELECT COUNT(*) AS total, 0 AS examined FROM (SELECT 1 AS one FROM messages WHERE ${
      sql.and([...indexed, ...residualMatch])
    } LIMIT ${COUNT_CAP + 1}) AS matched`
  const totalKind: "kept" | "window" | "counted" = unfiltered ? "kept" : residual ? "window" : "counted"
  return { page: pageQuery, windowEnd, total, residual, totalKind }
}

/** Runs the list's queries: the page (newest first), where older records may follow, and the total. */
export const listPage = (sql: SqlClient.SqlClient, filter: ListFilter) =>
  Effect.gen(function*() {
    const parties = filter.user === undefined
      ? undefined
      : yield* identifiersOf(sql, filter.organizationId, filter.user)
    const queries = listQueries(sql, filter, parties)
    const fetched = yield* messageRows(queries.page)
    const newestFirst = filter.page._tag === "After" ? [...fetched].reverse() : fetched
    const rows = filter.page._tag === "After"
      ? newestFirst.slice(newestFirst.length - Math.min(newestFirst.length, filter.page.limit))
      : newestFirst.slice(0, filter.page.limit)
    const oldest = rows[rows.length - 1]
    const more: Keyset | undefined = filter.page._tag === "After"
      ? (oldest === undefined ? filter.page.at : { createdAt: oldest.created_at, id: oldest.id })
      : fetched.length > filter.page.limit && oldest !== undefined
      ? { createdAt: oldest.created_at, id: oldest.id }
      : queries.residual
      ? yield* Effect.map(
        queries.windowEnd,
        (end) => (end[0] === undefined ? undefined : { createdAt: end[0].created_at, id: end[0].id })
      )
      : undefined
    const counted = (yield* totalRows(queries.total))[0]
    const matched = counted?.total ?? 0
    // A kept count is exact; a counted total stops at COUNT_CAP, and a window's count at what it examined.
    if (queries.totalKind === "kept") return { rows, more, total: matched, totalCapped: false } satisfies ListPage
    const capped = matched > COUNT_CAP || (counted?.examined ?? 0) >= SCAN_WINDOW
    return { rows, more, total: Math.min(matched, COUNT_CAP), totalCapped: capped } satisfies ListPage
  })

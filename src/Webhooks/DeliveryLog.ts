/**
 * The delivery log's queries (GET /api/webhooks/{id}/deliveries and GET /api/deliveries), each
 * bounded whatever the number of deliveries (see Domain/Paging.ts). A page is a merge of one index
 * range per webhook, newest first, read lazily (SQLite's MERGE of the UNION ALL arms, PostgreSQL's
 * Merge Append), so it reads about as many rows as it answers plus one per webhook; the deliveries
 * row carries no organization or instance, which would cost every delivery a wider row and one
 * more index. Each webhook's range is served by:
 * - no status: deliveries_webhook (webhook_id, created_at);
 * - failed, dead, cancelled: deliveries_webhook_failures, a partial index of these rare statuses
 *   (the success path never touches it);
 * - pending: deliveries_webhook_due, the queue, whose next_attempt_at is a pending row's created_at
 *   (enqueue, replay and recover keep it so);
 * - succeeded: no index of its own (it would be every row, moved on every success): the webhook's
 *   whole log is walked and filtered, and a page examines at most SCAN_WINDOW rows in all, its
 *   `before` cursor continuing from the last row examined.
 * Ranges are written `BETWEEN` (which also says the partial indexes' `next_attempt_at IS NOT NULL`):
 * SQLite's planner takes it on the right index, where a pair of comparisons, or an IS NOT NULL
 * term, sent it to deliveries_due. Plans are checked in test/delivery-log.test.ts.
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect, Schema } from "effect"
import { COUNT_CAP, type Keyset, type PageRequest, SCAN_WINDOW } from "../Domain/Paging.js"
import { type DeliveryStatus, deliveryStatuses } from "../Domain/Vocabulary.js"
import { decodeRows, SqlCount } from "../Sql/RowSchemas.js"

/** A delivery as its log shows it. */
export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  event_id: Schema.String,
  message_id: Schema.String,
  status: Schema.Literal(...deliveryStatuses),
  attempts: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.String),
  last_status_code: Schema.NullOr(Schema.Number),
  last_error: Schema.NullOr(Schema.String),
  created_at: Schema.String,
  updated_at: Schema.String
})
export type DeliveryRow = typeof DeliveryRow.Type
export const deliveryRows = decodeRows(DeliveryRow)

/** One logged attempt of a delivery. */
export const AttemptRow = Schema.Struct({
  delivery_id: Schema.String,
  attempt: Schema.Number,
  started_at: Schema.String,
  status_code: Schema.NullOr(Schema.Number),
  latency_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response_snippet: Schema.NullOr(Schema.String)
})
export type AttemptRow = typeof AttemptRow.Type
export const attemptRows = decodeRows(AttemptRow)

export const deliveryColumns =
  "id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, last_status_code, last_error, created_at, updated_at"

/** Most webhooks merged in one statement (SQLite allows 500 compound terms). */
const WEBHOOKS_PER_STATEMENT = 128

/**
 * The open ends of a range: timestamps in the stored format (not sentinels such as "" or "~",
 * which a PostgreSQL collation may order apart from the digits).
 */
const LOWEST = "0001-01-01T00:00:00.000Z"
const HIGHEST = "9999-12-31T23:59:59.999Z"

/** Fewest rows a walked webhook examines, however many webhooks share the window. */
const MIN_WINDOW = 200

export interface LogFilter {
  /** The webhooks whose deliveries are listed (the caller's, already checked). */
  readonly webhookIds: ReadonlyArray<string>
  readonly status: DeliveryStatus | undefined
  /** Inclusive lower bound on created_at. */
  readonly since: string | undefined
  /** Exclusive upper bound on created_at. */
  readonly until: string | undefined
  readonly page: PageRequest
}

export interface LogPage {
  readonly rows: ReadonlyArray<DeliveryRow>
  readonly attempts: ReadonlyArray<AttemptRow>
  /** Where older rows may follow (undefined: none may). */
  readonly more: Keyset | undefined
  /** For a page after a cursor that examined a window and found nothing: where the next `after` starts. */
  readonly examinedTo: Keyset | undefined
  readonly total: number
  readonly totalCapped: boolean
}

/** A page's row: the delivery and the time it is ordered by. */
const LogRow = Schema.Struct({ ...DeliveryRow.fields, sort_at: Schema.String })
type LogRow = typeof LogRow.Type
const logRows = decodeRows(LogRow)

/** A total's rows (one per statement's arm when walked): counts and sums, bigints (text) on PostgreSQL. */
const totalRows = decodeRows(Schema.Struct({ matched: SqlCount, examined: SqlCount }))

const maxOf = (
  a: Keyset,
  b: Keyset
) => (a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id) ? a : b)
const minOf = (a: Keyset, b: Keyset) => (maxOf(a, b) === a ? b : a)

/** Newest first, ties by id: the order of every page (and the After walk's, reversed). */
const newestFirst = (
  a: LogRow,
  b: LogRow
) => (a.sort_at < b.sort_at ? 1 : a.sort_at > b.sort_at ? -1 : a.id < b.id ? 1 : a.id > b.id ? -1 : 0)

const chunks = <A>(items: ReadonlyArray<A>) =>
  Array.from(
    { length: Math.ceil(items.length / WEBHOOKS_PER_STATEMENT) },
    (_, i) => items.slice(i * WEBHOOKS_PER_STATEMENT, (i + 1) * WEBHOOKS_PER_STATEMENT)
  )

export const logQueries = (sql: SqlClient.SqlClient, filter: LogFilter) => {
  const { page, status } = filter
  const walked = status === "succeeded"
  // A pending row's next_attempt_at is its created_at: the queue's index orders them.
  const time = status === "pending" ? "next_attempt_at" : "created_at"
  const t = sql.literal(time)
  const matchStatus = status === undefined || walked
    ? sql``
    : status === "pending"
    ? sql`AND status = 'pending'`
    : sql`AND status = ${status} AND status IN ('failed', 'dead', 'cancelled')`
  const descending = page._tag !== "After"
  const order = sql.literal(descending ? "ORDER BY sort_at DESC, id DESC" : "ORDER BY sort_at, id")

  /** The range of `time` a page may read, from since, until, the cursor and a window's bound. */
  const range = (bound: Keyset | undefined, withCursor: boolean) => {
    let low = filter.since ?? LOWEST
    let high = HIGHEST
    const residual: Array<Statement.Fragment> = []
    // Times are stored as toISOString() writes them (millisecond precision): before `until` is at
    // most a millisecond before it, and the range stays one BETWEEN (a further comparison sent
    // SQLite's planner to deliveries_due).
    if (filter.until !== undefined) high = new Date(Date.parse(filter.until) - 1).toISOString()
    if (withCursor && page._tag === "Before") {
      if (page.at.createdAt < high) high = page.at.createdAt
      residual.push(sql`(${t} < ${page.at.createdAt} OR (${t} = ${page.at.createdAt} AND id < ${page.at.id}))`)
    }
    if (withCursor && page._tag === "After") {
      if (page.at.createdAt > low) low = page.at.createdAt
      residual.push(sql`(${t} > ${page.at.createdAt} OR (${t} = ${page.at.createdAt} AND id > ${page.at.id}))`)
    }
    if (bound !== undefined && descending) {
      if (bound.createdAt > low) low = bound.createdAt
      residual.push(sql`(${t} > ${bound.createdAt} OR (${t} = ${bound.createdAt} AND id >= ${bound.id}))`)
    }
    if (bound !== undefined && !descending) {
      if (bound.createdAt < high) high = bound.createdAt
      residual.push(sql`(${t} < ${bound.createdAt} OR (${t} = ${bound.createdAt} AND id <= ${bound.id}))`)
    }
    // An empty residual renders 1=1.
    return sql`${t} BETWEEN ${low} AND ${high} AND ${sql.and(residual)}`
  }

  const armsOf = (webhookIds: ReadonlyArray<string>, select: (webhookId: string) => Statement.Fragment) =>
    webhookIds.map(select).reduce((all, arm, i) => (i === 0 ? arm : sql`${all} UNION ALL ${arm}`), sql``)

  const offset = page._tag === "Offset" ? page.offset : 0
  const take = page.limit + 1

  /** One statement's page: the merged arms, newest first (oldest first after a cursor). */
  const pageOf = (webhookIds: ReadonlyArray<string>, bound: Keyset | undefined, alone: boolean) =>
    sql`${
      armsOf(webhookIds, (webhookId) =>
        sql`SELECT ${t} AS sort_at, ${sql.literal(deliveryColumns)} FROM deliveries
          WHERE webhook_id = ${webhookId} ${matchStatus} AND ${range(bound, true)} ${
          walked ? sql`AND status = 'succeeded'` : sql``
        }`)
    } ${order} LIMIT ${alone ? take : offset + take} OFFSET ${alone ? offset : 0}`

  /** Where a walked webhook's window ends: its `window`-th row from where the page starts. */
  const windowEnd = (webhookId: string, window: number) =>
    sql<{ readonly created_at: string; readonly id: string }>`SELECT created_at, id FROM deliveries
      WHERE webhook_id = ${webhookId} AND ${range(undefined, true)}
      ${sql.literal(descending ? "ORDER BY created_at DESC, id DESC" : "ORDER BY created_at, id")} LIMIT 1 OFFSET ${
      window - 1
    }`

  /** The total of one statement's webhooks: counted up to COUNT_CAP + 1 (walked: within each window). */
  const totalOf = (webhookIds: ReadonlyArray<string>, window: number) =>
    walked
      ? sql`${
        armsOf(webhookIds, (webhookId) =>
          sql`SELECT COALESCE(SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END), 0) AS matched, COUNT(*) AS examined
            FROM (SELECT status FROM deliveries WHERE webhook_id = ${webhookId} AND ${range(undefined, false)}
              ORDER BY created_at DESC, id DESC LIMIT ${window}) AS examined`)
      }`
      : sql`SELECT COUNT(*) AS matched, 0 AS examined FROM (${
        armsOf(webhookIds, (webhookId) =>
          sql`SELECT 1 AS one FROM deliveries WHERE webhook_id = ${webhookId} ${matchStatus} AND ${
            range(undefined, false)
          }`)
      } LIMIT ${COUNT_CAP + 1}) AS matched`

  return { pageOf, windowEnd, totalOf, walked }
}

/** Runs the log's queries: the page (newest first), where older rows may follow, the attempts and the total. */
export const logPage = (sql: SqlClient.SqlClient, filter: LogFilter): Effect.Effect<LogPage, never> =>
  Effect.gen(function*() {
    const { page } = filter
    if (filter.webhookIds.length === 0) {
      return { rows: [], attempts: [], more: undefined, examinedTo: undefined, total: 0, totalCapped: false }
    }
    const queries = logQueries(sql, filter)
    const window = Math.max(MIN_WINDOW, Math.floor(SCAN_WINDOW / filter.webhookIds.length))
    const descending = page._tag !== "After"
    // A walked page is exact only up to the nearest window end of any webhook: it stops there.
    let bound: Keyset | undefined
    if (queries.walked) {
      for (const webhookId of filter.webhookIds) {
        const [end] = yield* queries.windowEnd(webhookId, window)
        if (end === undefined) continue
        const at = { createdAt: end.created_at, id: end.id }
        bound = bound === undefined ? at : descending ? maxOf(bound, at) : minOf(bound, at)
      }
    }
    const groups = chunks(filter.webhookIds)
    const alone = groups.length === 1
    const fetched = (yield* Effect.forEach(groups, (group) => logRows(queries.pageOf(group, bound, alone)))).flat()
    const merged = alone
      ? fetched
      : [...fetched].sort(descending ? newestFirst : (a, b) => newestFirst(b, a)).slice(
        page._tag === "Offset" ? page.offset : 0
      )
    const inOrder = descending ? merged : [...merged].reverse()
    const rows = descending ? inOrder.slice(0, page.limit) : inOrder.slice(Math.max(0, inOrder.length - page.limit))
    const oldest = rows[rows.length - 1]
    const more: Keyset | undefined = !descending
      ? (oldest === undefined
        ? (page._tag === "After" ? page.at : undefined)
        : { createdAt: oldest.created_at, id: oldest.id })
      : merged.length > page.limit && oldest !== undefined
      ? { createdAt: oldest.created_at, id: oldest.id }
      : bound
    const examinedTo = !descending && rows.length === 0 ? bound : undefined

    let matched = 0
    let capped = false
    for (const group of groups) {
      for (const counted of yield* totalRows(queries.totalOf(group, window))) {
        matched += counted.matched
        if (counted.examined >= window) capped = true
      }
    }
    const attempts = rows.length === 0 ? [] : yield* attemptRows(sql`
      SELECT delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
        FROM delivery_attempts WHERE ${sql.in("delivery_id", rows.map((r) => r.id))}
       ORDER BY delivery_id, attempt, started_at`)
    return {
      rows: rows.map(({ sort_at, ...row }) => row),
      attempts,
      more,
      examinedTo,
      total: Math.min(matched, COUNT_CAP),
      totalCapped: capped || matched > COUNT_CAP
    }
  }).pipe(Effect.orDie)

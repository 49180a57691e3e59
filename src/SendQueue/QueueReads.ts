/**
 * What the queue holds, read (SendQueueRepo's reads, beside its writes in SendQueue/Repo.ts): the
 * numbers and lanes with sends due and the soonest due time (the drainer's rounds), a number's depth
 * (the queue-full bound), each number's depth, oldest wait and measured pace (the metrics, GET
 * /api/send-queues, the live streams, the overview's samples). Every read goes through an index,
 * never the whole queue: it may hold a million sends (migration 0031).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import { countRows, decodeRows, SqlBigint } from "../Sql/RowSchemas.js"
import { priorityRank } from "./Rules.js"

const decodeNext = decodeRows(Schema.Struct({ next_at: Schema.NullOr(SqlBigint) }))

/** How many sends wait for one number. */
export const depthOf = (sql: SqlClient.SqlClient) => (phoneNumberId: string) =>
  Effect.map(
    countRows(sql`SELECT COUNT(*) AS n FROM send_queue WHERE phone_number_id = ${phoneNumberId}`),
    (rows) => rows[0]?.n ?? 0
  )

/** The seconds of sends the measured pace is taken over. */
const PACE_WINDOW_SECONDS = 10

/**
 * Each number's depth, how long its oldest send whose time has come has waited, and its sends a second
 * over the last PACE_WINDOW_SECONDS seconds, this one included (the metrics' scrape, GET /api/send-queues).
 */
export const readings = (sql: SqlClient.SqlClient) => (now: number, numbers?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (numbers !== undefined && numbers.length === 0) return []
    const onlyMade = numbers === undefined ? sql`` : sql`AND ${sql.in("phone_number_id", numbers)}`
    // Per number, read through indexes only: its count from send_queue_pair, and the oldest due time of
    // each lane from the first entry of send_queue_number_due (a send's time came at its send_at, or at
    // its retry's). A GROUP BY over the table read every row: 779 ms with 300,000 queued, on the one
    // thread that answers requests, once a minute for the depth samples and at each metrics scrape.
    const oldestIn = (rank: number) =>
      sql`(SELECT MIN(q.due_at) FROM send_queue q WHERE q.phone_number_id = numbers.id AND q.state = 'queued'
        AND q.priority = ${rank} AND q.due_at <= ${now})`
    const queued = yield* decodeRows(
      Schema.Struct({
        phone_number_id: Schema.String,
        n: SqlBigint,
        transactional: Schema.NullOr(SqlBigint),
        bulk: Schema.NullOr(SqlBigint)
      })
    )(
      sql`WITH RECURSIVE ${numbersInQueue(sql)}
        SELECT id AS phone_number_id,
          (SELECT COUNT(*) FROM send_queue c WHERE c.phone_number_id = numbers.id) AS n,
          ${oldestIn(priorityRank.transactional)} AS transactional, ${oldestIn(priorityRank.bulk)} AS bulk
        FROM numbers WHERE id IS NOT NULL ${numbers === undefined ? sql`` : sql`AND ${sql.in("id", numbers)}`}`
    )
    const second = Math.floor(now / 1000)
    const made = yield* decodeRows(Schema.Struct({ phone_number_id: Schema.String, n: SqlBigint }))(
      sql`SELECT phone_number_id, COUNT(*) AS n FROM queue_send_seconds
        WHERE second > ${second - PACE_WINDOW_SECONDS} ${onlyMade} GROUP BY phone_number_id`
    )
    const byNumber = new Map<string, QueueReading>()
    for (const row of queued) {
      const oldest = Math.min(row.transactional ?? Infinity, row.bulk ?? Infinity)
      byNumber.set(row.phone_number_id, {
        phoneNumberId: row.phone_number_id,
        depth: row.n,
        oldestWaitSeconds: oldest === Infinity ? 0 : Math.max(0, (now - oldest) / 1000),
        sendsPerSecond: 0
      })
    }
    for (const row of made) {
      const known = byNumber.get(row.phone_number_id)
      byNumber.set(row.phone_number_id, {
        phoneNumberId: row.phone_number_id,
        depth: known?.depth ?? 0,
        oldestWaitSeconds: known?.oldestWaitSeconds ?? 0,
        sendsPerSecond: row.n / PACE_WINDOW_SECONDS
      })
    }
    return [...byNumber.values()]
  })

/** A number's queue as read now. */
interface QueueReading {
  readonly phoneNumberId: string
  readonly depth: number
  readonly oldestWaitSeconds: number
  readonly sendsPerSecond: number
}

/** Counts of seconds older than a minute: the measured pace reads only the last PACE_WINDOW_SECONDS. */
export const pruneSendSeconds = (sql: SqlClient.SqlClient) => (now: number) =>
  Effect.asVoid(sql`DELETE FROM queue_send_seconds WHERE second < ${Math.floor(now / 1000) - 60}`)

/**
 * `numbers (id)`: each number with sends in the queue, found by one seek past the previous one (a loose
 * index scan, as a recursive query), then NULL; for `WITH RECURSIVE`.
 */
const numbersInQueue = (sql: SqlClient.SqlClient) =>
  sql`numbers (id) AS (
    SELECT MIN(phone_number_id) FROM send_queue
    UNION ALL
    SELECT (SELECT MIN(phone_number_id) FROM send_queue WHERE phone_number_id > numbers.id)
      FROM numbers WHERE numbers.id IS NOT NULL
  )`

const decodeDueLanes = decodeRows(
  Schema.Struct({ phone_number_id: Schema.String, transactional: Schema.Number, bulk: Schema.Number })
)

/** A number's lanes (SendQueue/Rules.ts priorityRank) with sends due. */
export interface DueLanes {
  readonly phoneNumberId: string
  readonly priorities: ReadonlyArray<number>
}

/**
 * The numbers with sends that may be due now, and which of their lanes: each number in the queue
 * (`numbersInQueue`), then one seek per lane.
 * A DISTINCT over the due sends read every one of them each round (224 µs with 1,000 queued, growing
 * with the depth); a lane without sends due is not leased (an empty lease was a statement a round).
 */
export const dueLanes = (sql: SqlClient.SqlClient) => (now: number) => {
  const dueIn = (rank: number) =>
    sql`CASE WHEN EXISTS (SELECT 1 FROM send_queue q WHERE q.phone_number_id = numbers.id AND q.state = 'queued'
      AND q.priority = ${rank} AND q.due_at <= ${now}) THEN 1 ELSE 0 END`
  return Effect.map(
    decodeDueLanes(sql`WITH RECURSIVE ${numbersInQueue(sql)}
      SELECT id AS phone_number_id, ${dueIn(priorityRank.transactional)} AS transactional,
        ${dueIn(priorityRank.bulk)} AS bulk
      FROM numbers WHERE id IS NOT NULL`),
    (rows): ReadonlyArray<DueLanes> =>
      rows.flatMap((row) => {
        const priorities = [
          ...(row.transactional === 1 ? [priorityRank.transactional] : []),
          ...(row.bulk === 1 ? [priorityRank.bulk] : [])
        ]
        return priorities.length === 0 ? [] : [{ phoneNumberId: row.phone_number_id, priorities }]
      })
  )
}

/** The soonest time a queued send falls due (undefined: none queued). */
export const nextDueAt = (sql: SqlClient.SqlClient) =>
  Effect.map(
    decodeNext(sql`SELECT MIN(due_at) AS next_at FROM send_queue WHERE state = 'queued'`),
    (rows) => rows[0]?.next_at ?? undefined
  )

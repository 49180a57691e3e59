/**
 * The queue's SQL: `send_queue` (one row per queued send until it is made or given up), `send_pairs`
 * (Meta's pair rate per number and person) and `number_throughput` (each number's level). Times are
 * epoch milliseconds of the replica's clock. The message records themselves are Messages/Repo.ts's.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Array as Arr, Effect, Schema } from "effect"
import { InstanceId, OrganizationId } from "../Domain/Ids.js"
import { isPostgres, skipLocked } from "../Sql/Dialect.js"
import { countRows, decodeRows, SqlBigint } from "../Sql/RowSchemas.js"
import { powerOfTwoChunks } from "../Sql/StatementShapes.js"

/** A queued send as the drainer takes it. */
const QueuedRow = Schema.Struct({
  seq: SqlBigint,
  message_id: Schema.String,
  organization_id: OrganizationId,
  instance_id: InstanceId,
  waba_id: Schema.String,
  phone_number_id: Schema.String,
  party: Schema.String,
  priority: Schema.Number,
  body: Schema.String,
  endpoint: Schema.String,
  expires_at: SqlBigint,
  attempts: Schema.Number,
  pair_tat: Schema.NullOr(SqlBigint)
})
export type QueuedRow = typeof QueuedRow.Type

const decodeQueued = decodeRows(QueuedRow)
/** A send taken out of the queue without being made (a lost lease, a validity ended): what its outcome is told with. */
const TakenRow = Schema.Struct({
  message_id: Schema.String,
  organization_id: OrganizationId,
  instance_id: InstanceId,
  phone_number_id: Schema.String,
  party: Schema.String,
  attempts: Schema.Number,
  last_error: Schema.NullOr(Schema.String)
})
export type TakenRow = typeof TakenRow.Type
const decodeTaken = decodeRows(TakenRow)
const TAKEN_COLUMNS = "message_id, organization_id, instance_id, phone_number_id, party, attempts, last_error"
const decodeNumbers = decodeRows(Schema.Struct({ phone_number_id: Schema.String }))
const decodeCancelled = decodeRows(Schema.Struct({ ...TakenRow.fields, state: Schema.String }))
const decodeNext = decodeRows(Schema.Struct({ next_at: Schema.NullOr(SqlBigint) }))

/** A send to put in the queue (its record is written beside it, in the same transaction). */
interface NewQueuedSend {
  readonly messageId: string
  readonly organizationId: string
  readonly instanceId: string
  readonly wabaId: string
  readonly phoneNumberId: string
  readonly party: string
  readonly priority: number
  readonly body: string
  readonly endpoint: string
  readonly sendAt: number
  readonly expiresAt: number
}

/** What a cancel found: the row taken out, a send already under way, or nothing queued. */
type CancelOutcome =
  | { readonly _tag: "Cancelled"; readonly row: TakenRow }
  | { readonly _tag: "Sending" }
  | { readonly _tag: "Absent" }

/** Sends put in the queue, many rows per statement. */
const insert =
  (sql: SqlClient.SqlClient) => (sends: ReadonlyArray<NewQueuedSend>): Effect.Effect<void, SqlError.SqlError> =>
    Effect.forEach(
      powerOfTwoChunks(sends),
      (chunk) =>
        sql`INSERT INTO send_queue ${
          sql.insert(chunk.map((send) => ({
            message_id: send.messageId,
            organization_id: send.organizationId,
            instance_id: send.instanceId,
            waba_id: send.wabaId,
            phone_number_id: send.phoneNumberId,
            party: send.party,
            priority: send.priority,
            body: send.body,
            endpoint: send.endpoint,
            send_at: send.sendAt,
            expires_at: send.expiresAt,
            due_at: send.sendAt,
            attempts: 0,
            state: "queued"
          })))
        }`,
      { discard: true }
    )

/**
 * Leases up to `limit` sends of one number that may go now, for `owner` until `leaseUntil`:
 * transactional before bulk, each lane in the order accepted; per person only the oldest send
 * whose time has come (the next waits until it is done), and only when Meta's pair rate allows.
 */
const lease = (sql: SqlClient.SqlClient) =>
(input: {
  readonly phoneNumberId: string
  readonly limit: number
  readonly now: number
  readonly owner: string
  readonly leaseUntil: number
  readonly pairBurstMs: number
  /** Only sends of this lane (SendQueue/Rules.ts priorityRank); both when absent. */
  readonly onlyPriority?: number | undefined
}): Effect.Effect<ReadonlyArray<QueuedRow>, SqlError.SqlError> =>
  sql.withTransaction(Effect.gen(function*() {
    const rows = yield* decodeQueued(sql`SELECT q.seq, q.message_id, q.organization_id, q.instance_id, q.waba_id,
        q.phone_number_id, q.party, q.priority, q.body, q.endpoint, q.expires_at, q.attempts, p.tat AS pair_tat
      FROM send_queue q
      LEFT JOIN send_pairs p ON p.phone_number_id = q.phone_number_id AND p.party = q.party
      WHERE q.phone_number_id = ${input.phoneNumberId} AND q.state = 'queued'
        AND q.due_at <= ${input.now} AND q.expires_at > ${input.now}
        ${input.onlyPriority === undefined ? sql`` : sql`AND q.priority = ${input.onlyPriority}`}
        AND (p.tat IS NULL OR p.tat - ${input.now} <= ${input.pairBurstMs})
        AND NOT EXISTS (SELECT 1 FROM send_queue e WHERE e.phone_number_id = q.phone_number_id
          AND e.party = q.party AND e.seq < q.seq AND e.send_at <= ${input.now})
      ORDER BY q.priority, q.seq
      LIMIT ${input.limit} ${isPostgres(sql) ? sql.literal("FOR UPDATE OF q SKIP LOCKED") : skipLocked(sql)}`)
    if (rows.length === 0) return rows
    yield* sql`UPDATE send_queue SET state = 'leased', lease_owner = ${input.owner}, lease_until = ${input.leaseUntil}
      WHERE ${sql.in("seq", rows.map((row) => row.seq))}`
    return rows
  }))

/**
 * The Graph call of this send begins: from now on a lost lease means the outcome is unknown. False
 * when the send is no longer this replica's to make (cancelled meanwhile, or its lease ran out and
 * another replica took it): then it must not be sent.
 */
const claimSending = (sql: SqlClient.SqlClient) => (messageId: string, owner: string, leaseUntil: number) =>
  Effect.map(
    sql<{ readonly message_id: string }>`UPDATE send_queue SET state = 'sending', lease_until = ${leaseUntil}
      WHERE message_id = ${messageId} AND state = 'leased' AND lease_owner = ${owner} RETURNING message_id`,
    (rows) => rows.length === 1
  )

/** A number and person's pair rate from now on (see SendQueue/Rules.ts), when there is one to keep. */
interface PairTat {
  readonly phoneNumberId: string
  readonly party: string
  readonly tat: number
}

const savePair = (sql: SqlClient.SqlClient, pair: PairTat | undefined) =>
  pair === undefined ?
    Effect.void :
    sql`INSERT INTO send_pairs ${
      sql.insert({ phone_number_id: pair.phoneNumberId, party: pair.party, tat: pair.tat })
    } ON CONFLICT (phone_number_id, party) DO UPDATE SET tat = ${pair.tat}`

/**
 * A send is done (made or given up): its row leaves the queue; a send that went moves its pair's rate on
 * and is noted in its number's second (`queue_send_seconds`, the measured pace).
 */
const finish = (sql: SqlClient.SqlClient) =>
(input: {
  readonly messageId: string
  readonly pair?: PairTat
  /** When the send that went was made (epoch ms). */
  readonly madeAt?: number
}) =>
  Effect.all([
    savePair(sql, input.pair),
    input.pair === undefined || input.madeAt === undefined ?
      Effect.void :
      sql`INSERT INTO queue_send_seconds ${
        sql.insert({ phone_number_id: input.pair.phoneNumberId, second: Math.floor(input.madeAt / 1000) })
      }`,
    sql`DELETE FROM send_queue WHERE message_id = ${input.messageId}`
  ], { discard: true })

/** A send to try again at `dueAt` (and, for the pair rate, its pair held back until then). */
const retryLater = (sql: SqlClient.SqlClient) =>
(input: {
  readonly messageId: string
  readonly dueAt: number
  readonly error: string
  readonly pair?: PairTat
}) =>
  Effect.zipRight(
    savePair(sql, input.pair),
    sql`UPDATE send_queue SET state = 'queued', lease_owner = NULL, lease_until = NULL, due_at = ${input.dueAt},
      attempts = attempts + 1, last_error = ${input.error} WHERE message_id = ${input.messageId}`
  ).pipe(Effect.asVoid)

/** Leased sends whose turn did not come before the replica stopped: back to the queue. */
const giveBack = (sql: SqlClient.SqlClient) => (messageIds: ReadonlyArray<string>, owner: string) =>
  messageIds.length === 0 ? Effect.void : sql`UPDATE send_queue SET state = 'queued', lease_owner = NULL,
    lease_until = NULL WHERE ${sql.in("message_id", messageIds)} AND state = 'leased' AND lease_owner = ${owner}`
    .pipe(Effect.asVoid)

/**
 * What a lost replica left: leases run out before the Graph call go back to the queue; sends whose
 * call began are taken out (their outcome is unknown) and answered for the caller to record.
 */
const recoverLeases = (sql: SqlClient.SqlClient) => (now: number) =>
  sql.withTransaction(Effect.gen(function*() {
    yield* sql`UPDATE send_queue SET state = 'queued', lease_owner = NULL, lease_until = NULL
      WHERE state = 'leased' AND lease_until < ${now}`
    // Taken out and read in one statement: two replicas recovering at once never both get a row.
    return yield* decodeTaken(
      sql`DELETE FROM send_queue WHERE state = 'sending' AND lease_until < ${now}
        RETURNING ${sql.literal(TAKEN_COLUMNS)}`
    )
  }))

/** Queued sends whose validity ended before their turn: taken out, answered for the caller to record. */
const takeExpired = (sql: SqlClient.SqlClient) => (now: number) =>
  decodeTaken(
    sql`DELETE FROM send_queue WHERE state = 'queued' AND expires_at <= ${now} RETURNING ${sql.literal(TAKEN_COLUMNS)}`
  )

/** Takes a queued send out if it has not begun; says what it found. */
const cancel = (sql: SqlClient.SqlClient) => (messageId: string): Effect.Effect<CancelOutcome, SqlError.SqlError> =>
  sql.withTransaction(Effect.gen(function*() {
    const found = yield* decodeCancelled(
      sql`SELECT state, ${sql.literal(TAKEN_COLUMNS)} FROM send_queue WHERE message_id = ${messageId}${
        sql.literal(isPostgres(sql) ? " FOR UPDATE" : "")
      }`
    )
    const row = found[0]
    if (row === undefined) return { _tag: "Absent" } as const
    if (row.state === "sending") return { _tag: "Sending" } as const
    yield* sql`DELETE FROM send_queue WHERE message_id = ${messageId}`
    return { _tag: "Cancelled", row } as const
  }))

/**
 * Of `messageIds`, the sends not yet begun taken off the queue and answered (a broadcast cancelled):
 * one statement per thousand, under the engines' limits on parameters.
 */
const cancelAll = (sql: SqlClient.SqlClient) => (messageIds: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(Arr.chunksOf(messageIds, 1000), (chunk) =>
      decodeTaken(
        sql`DELETE FROM send_queue WHERE ${sql.in("message_id", chunk)} AND state IN ('queued', 'leased')
          RETURNING ${sql.literal(TAKEN_COLUMNS)}`
      )),
    (chunks) => chunks.flat()
  )

/** How many sends wait for one number. */
const depthOf = (sql: SqlClient.SqlClient) => (phoneNumberId: string) =>
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
const readings = (sql: SqlClient.SqlClient) => (now: number, numbers?: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    if (numbers !== undefined && numbers.length === 0) return []
    // A caller's own numbers are read through the per-number index, not the whole queue (a million rows
    // at most: a live stream reads them at each heartbeat); the metrics' scrape reads every number.
    const onlyQueued = numbers === undefined ? sql`` : sql`WHERE ${sql.in("phone_number_id", numbers)}`
    const onlyMade = numbers === undefined ? sql`` : sql`AND ${sql.in("phone_number_id", numbers)}`
    const queued = yield* decodeRows(
      Schema.Struct({ phone_number_id: Schema.String, n: SqlBigint, oldest: Schema.NullOr(SqlBigint) })
    )(
      sql`SELECT phone_number_id, COUNT(*) AS n, MIN(CASE WHEN send_at <= ${now} THEN send_at END) AS oldest
        FROM send_queue ${onlyQueued} GROUP BY phone_number_id`
    )
    const second = Math.floor(now / 1000)
    const made = yield* decodeRows(Schema.Struct({ phone_number_id: Schema.String, n: SqlBigint }))(
      sql`SELECT phone_number_id, COUNT(*) AS n FROM queue_send_seconds
        WHERE second > ${second - PACE_WINDOW_SECONDS} ${onlyMade} GROUP BY phone_number_id`
    )
    const byNumber = new Map<string, QueueReading>()
    for (const row of queued) {
      byNumber.set(row.phone_number_id, {
        phoneNumberId: row.phone_number_id,
        depth: row.n,
        oldestWaitSeconds: row.oldest === null ? 0 : Math.max(0, (now - row.oldest) / 1000),
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
const pruneSendSeconds = (sql: SqlClient.SqlClient) => (now: number) =>
  Effect.asVoid(sql`DELETE FROM queue_send_seconds WHERE second < ${Math.floor(now / 1000) - 60}`)

/** The numbers with sends that may be due now. */
const dueNumbers = (sql: SqlClient.SqlClient) => (now: number) =>
  Effect.map(
    decodeNumbers(sql`SELECT DISTINCT phone_number_id FROM send_queue WHERE state = 'queued' AND due_at <= ${now}`),
    (rows) => rows.map((row) => row.phone_number_id)
  )

/** The soonest time a queued send falls due (undefined: none queued). */
const nextDueAt = (sql: SqlClient.SqlClient) =>
  Effect.map(
    decodeNext(sql`SELECT MIN(due_at) AS next_at FROM send_queue WHERE state = 'queued'`),
    (rows) => rows[0]?.next_at ?? undefined
  )

export class SendQueueRepo extends Effect.Service<SendQueueRepo>()("SendQueueRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      insert: insert(sql),
      lease: lease(sql),
      claimSending: claimSending(sql),
      finish: finish(sql),
      retryLater: retryLater(sql),
      giveBack: giveBack(sql),
      recoverLeases: recoverLeases(sql),
      takeExpired: takeExpired(sql),
      cancel: cancel(sql),
      cancelAll: cancelAll(sql),
      depthOf: depthOf(sql),
      readings: readings(sql),
      pruneSendSeconds: pruneSendSeconds(sql),
      dueNumbers: dueNumbers(sql),
      nextDueAt: nextDueAt(sql)
    } as const
  })
}) {}

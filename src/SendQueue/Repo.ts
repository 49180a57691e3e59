/**
 * The queue's SQL: `send_queue` (one row per queued send until it is made or given up), `send_pairs`
 * (Meta's pair rate per number and person) and `number_throughput` (each number's level). Times are
 * epoch milliseconds of the replica's clock. The message records themselves are Messages/Repo.ts's.
 * The writes are here; the reads of what the queue holds are SendQueue/QueueReads.ts's.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Array as Arr, Effect, Schema } from "effect"
import { InstanceId, OrganizationId } from "../Domain/Ids.js"
import { isPostgres, skipLocked } from "../Sql/Dialect.js"
import { decodeRows, SqlBigint } from "../Sql/RowSchemas.js"
import { padded, powerOfTwoChunks } from "../Sql/StatementShapes.js"
import { WriteBatcher, written } from "../Sql/WriteBatcher.js"
import { depthOf, dueLanes, nextDueAt, pruneSendSeconds, readings } from "./QueueReads.js"

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
const decodeCancelled = decodeRows(Schema.Struct({ ...TakenRow.fields, state: Schema.String }))

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

/** What one lane's lease asks for (see `lease`). */
export interface LaneLease {
  readonly phoneNumberId: string
  /** The lane: SendQueue/Rules.ts priorityRank. */
  readonly priority: number
  readonly limit: number
  readonly now: number
  readonly owner: string
  readonly leaseUntil: number
  readonly pairBurstMs: number
}

/**
 * Leases up to `limit` sends of one number's lane (`priority`: SendQueue/Rules.ts priorityRank) that may
 * go now, for `owner` until `leaseUntil`, in the order they fell due (the order accepted, unless
 * scheduled); per person only the oldest send whose time has come (the next waits until it is done),
 * and only when Meta's pair rate allows. It reads the lane through send_queue_number_due, which ends in
 * (due_at, seq): only the rows it takes and those a person's order or pair rate holds back, whatever
 * the depth (migration 0031).
 */
const lease =
  (sql: SqlClient.SqlClient) => (input: LaneLease): Effect.Effect<ReadonlyArray<QueuedRow>, SqlError.SqlError> =>
    sql.withTransaction(Effect.gen(function*() {
      const rows = yield* decodeQueued(sql`SELECT q.seq, q.message_id, q.organization_id, q.instance_id, q.waba_id,
        q.phone_number_id, q.party, q.priority, q.body, q.endpoint, q.expires_at, q.attempts, p.tat AS pair_tat
      FROM send_queue q
      LEFT JOIN send_pairs p ON p.phone_number_id = q.phone_number_id AND p.party = q.party
      WHERE q.phone_number_id = ${input.phoneNumberId} AND q.state = 'queued' AND q.priority = ${input.priority}
        AND q.due_at <= ${input.now} AND q.expires_at > ${input.now}
        AND (p.tat IS NULL OR p.tat - ${input.now} <= ${input.pairBurstMs})
        AND NOT EXISTS (SELECT 1 FROM send_queue e WHERE e.phone_number_id = q.phone_number_id
          AND e.party = q.party AND e.seq < q.seq AND e.send_at <= ${input.now})
      ORDER BY q.due_at, q.seq
      LIMIT ${input.limit} ${isPostgres(sql) ? sql.literal("FOR UPDATE OF q SKIP LOCKED") : skipLocked(sql)}`)
      if (rows.length === 0) return rows
      yield* sql`UPDATE send_queue SET state = 'leased', lease_owner = ${input.owner}, lease_until = ${input.leaseUntil}
      WHERE ${sql.in("seq", rows.map((row) => row.seq))}`
      return rows
    }))

/**
 * A round's leases, every number and lane, in one transaction: one commit a round rather than one a
 * lane (a commit is an fsync on SQLite), and if one fails none is left leased and idle.
 */
const leaseLanes = (sql: SqlClient.SqlClient) => (requests: ReadonlyArray<LaneLease>) =>
  requests.length === 0 ? Effect.succeed([]) : sql.withTransaction(Effect.forEach(requests, lease(sql)))

/** A send whose Graph call is about to begin, claimed by the replica that leased it. */
interface Claim {
  readonly messageId: string
  readonly owner: string
  readonly leaseUntil: number
}

/**
 * The Graph calls of these sends begin: from now on a lost lease means the outcome is unknown. Each
 * answer is false when its send is no longer its replica's to make (cancelled meanwhile, or its lease
 * ran out and another replica took it): then it must not be sent. A claim must be durable before its
 * call, so claims share the group commit, gathering (one statement per owner): alone, each was a
 * commit of its own, an fsync on SQLite (3 ms a send, most of the drain's cost: docs/PERFORMANCE.md);
 * a paced send waits at most the gathering time (10 ms) more, and its number's pace is kept by its
 * slots. A claim's lease runs to the group's latest `leaseUntil`, a few milliseconds more than asked at most.
 */
const claimWriter = (sql: SqlClient.SqlClient, batcher: WriteBatcher["Type"]) =>
  batcher.groupNow((claims: ReadonlyArray<Claim>) =>
    Effect.gen(function*() {
      const claimed = new Set<string>()
      for (const [owner, ofOwner] of Object.entries(Arr.groupBy(claims, (claim) => claim.owner))) {
        const leaseUntil = Math.max(...ofOwner.map((claim) => claim.leaseUntil))
        for (const chunk of Arr.chunksOf(ofOwner, 256)) {
          const rows = yield* sql<{ readonly message_id: string }>`UPDATE send_queue SET state = 'sending',
            lease_until = ${leaseUntil} WHERE ${sql.in("message_id", padded(chunk.map((claim) => claim.messageId)))}
            AND state = 'leased' AND lease_owner = ${owner} RETURNING message_id`
          for (const row of rows) claimed.add(row.message_id)
        }
      }
      // One send claimed twice in a group (its lease ran out while it waited, and this replica leased it
      // again): the statement updates its row once, so only the first claim gets it.
      return claims.map((claim) => claimed.delete(claim.messageId))
    }), { gathers: true })

/** A number and person's pair rate from now on (see SendQueue/Rules.ts), when there is one to keep. */
interface PairTat {
  readonly phoneNumberId: string
  readonly party: string
  readonly tat: number
}

/** Pairs' rates from now on, many per statement (at most one row per pair: see latestPairs). */
const savePairs = (sql: SqlClient.SqlClient, pairs: ReadonlyArray<PairTat>) =>
  Effect.forEach(
    powerOfTwoChunks(pairs),
    (chunk) =>
      sql`INSERT INTO send_pairs ${
        sql.insert(chunk.map((pair) => ({ phone_number_id: pair.phoneNumberId, party: pair.party, tat: pair.tat })))
      } ON CONFLICT (phone_number_id, party) DO UPDATE SET tat = excluded.tat`,
    { discard: true }
  )

/** A send done (made or given up); one that went (`pair`, `madeAt`: when) moves its pair's rate on. */
export interface Finish {
  readonly messageId: string
  readonly pair?: PairTat
  readonly madeAt?: number
}

/** Each pair once, at its latest rate, in one order of keys: two replicas' groups never wait on each other in a cycle. */
const latestPairs = (finishes: ReadonlyArray<Finish>): ReadonlyArray<PairTat> => {
  const pairs = new Map<string, PairTat>()
  for (const { pair } of finishes) {
    if (pair === undefined) continue
    const key = `${pair.phoneNumberId} ${pair.party}`
    const known = pairs.get(key)
    if (known === undefined || known.tat < pair.tat) pairs.set(key, pair)
  }
  return [...pairs.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, pair]) => pair)
}

/**
 * Sends done, a group's at once (QueueEvents' group writer): their rows leave the queue; those that
 * went move their pair's rate on and are noted in their number's second (`queue_send_seconds`, the
 * measured pace). A statement per table for the group, where there were three a send (about 250 µs a
 * send on SQLite with 50 numbers draining: docs/PERFORMANCE.md).
 */
const finishAll = (sql: SqlClient.SqlClient) => (finishes: ReadonlyArray<Finish>) =>
  Effect.gen(function*() {
    yield* savePairs(sql, latestPairs(finishes))
    const made = finishes.flatMap(({ madeAt, pair }) =>
      pair === undefined || madeAt === undefined
        ? []
        : [{ phone_number_id: pair.phoneNumberId, second: Math.floor(madeAt / 1000) }]
    )
    for (const chunk of powerOfTwoChunks(made)) yield* sql`INSERT INTO queue_send_seconds ${sql.insert(chunk)}`
    for (const chunk of Arr.chunksOf(finishes.map((finish) => finish.messageId), 256)) {
      yield* sql`DELETE FROM send_queue WHERE ${sql.in("message_id", padded(chunk))}`
    }
  })

/** A send to try again at `dueAt` (and, for the pair rate, its pair held back until then). */
const retryLater = (sql: SqlClient.SqlClient) =>
(input: {
  readonly messageId: string
  readonly dueAt: number
  readonly error: string
  readonly pair?: PairTat
}) =>
  Effect.zipRight(
    savePairs(sql, input.pair === undefined ? [] : [input.pair]),
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
    // `state <> 'queued'` names the lease index's condition (migration 0031), so both engines use it.
    yield* sql`UPDATE send_queue SET state = 'queued', lease_owner = NULL, lease_until = NULL
      WHERE state <> 'queued' AND lease_until < ${now} AND state = 'leased'`
    // Taken out and read in one statement: two replicas recovering at once never both get a row.
    return yield* decodeTaken(
      sql`DELETE FROM send_queue WHERE state <> 'queued' AND lease_until < ${now} AND state = 'sending'
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

export class SendQueueRepo extends Effect.Service<SendQueueRepo>()("SendQueueRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const claims = claimWriter(sql, yield* WriteBatcher)
    const claimSendingNow = (messageId: string, owner: string, leaseUntil: number) =>
      written(claims, { messageId, owner, leaseUntil })
    return {
      insert: insert(sql),
      leaseLanes: leaseLanes(sql),
      /** See claimWriter: true when the send is still this replica's to make. A plain promise, for SendQueue/LeasedSends.ts. */
      claimSendingNow,
      finishAll: finishAll(sql),
      retryLater: retryLater(sql),
      giveBack: giveBack(sql),
      recoverLeases: recoverLeases(sql),
      takeExpired: takeExpired(sql),
      cancel: cancel(sql),
      cancelAll: cancelAll(sql),
      depthOf: depthOf(sql),
      readings: readings(sql),
      pruneSendSeconds: pruneSendSeconds(sql),
      dueLanes: dueLanes(sql),
      nextDueAt: nextDueAt(sql)
    } as const
  })
}) {}

/**
 * SQL for message records. Outbound sends are written `pending` before the upstream call and updated
 * with its outcome; status events move a record forward only; messages the upstream tells of are inserted once.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, type Exit } from "effect"
import type { CallChange } from "../Calls/CallEvents.js"
import { recordCallEvents } from "../Calls/Repo.js"
import { type InstanceId, newId, nowIso, type OrganizationId } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"
import { type FailureReason, type Priority } from "../Domain/Vocabulary.js"
import { expireLevels, type ThroughputUpgradeChange } from "../PhoneNumbers/ThroughputRepo.js"
import { isPostgres, jsonArrayRows, lockNames, lockRead } from "../Sql/Dialect.js"
import { insertMany, jsonRowsInsert } from "../Sql/RowStatement.js"
import { powerOfTwoChunks } from "../Sql/StatementShapes.js"
import { WriteBatcher, written } from "../Sql/WriteBatcher.js"
import {
  recordTemplateCategories,
  type TemplateCategoryChange,
  templateEndpoint,
  type Via
} from "../Templates/Categories.js"
import { type SendEndpoint } from "../Upstream/Upstream.js"
import { type MessageChange, namedRecords, planChanges, type StoredRecord } from "./ChangePlan.js"
import { applyEarly, keepEarly, STEP_COLUMNS } from "./EarlyStatuses.js"
import { type IdentityChange, type IdentityLink, learnIdentities } from "./Identities.js"
import {
  type ListFilter,
  type ListPage,
  listPage,
  messageColumns,
  type MessageRow,
  messageRows
} from "./ListQueries.js"
import { type OptOutChange, recordOptOuts } from "./OptOuts.js"
import { markQueueFailed } from "./QueueFailures.js"
import { INBOUND_STATUS, type ReceivedMessage } from "./Records.js"

/** What an upstream change does to the records: messages, calls, pairs of identifiers, template categories. */
export type RecordChange =
  | MessageChange
  | CallChange
  | IdentityChange
  | TemplateCategoryChange
  | ThroughputUpgradeChange
  | OptOutChange

/** What a send's record is written with. */
interface OutboundInput {
  readonly organizationId: OrganizationId
  readonly instanceId: InstanceId
  /** The recipient's number, or their BSUID when the send names no number. */
  readonly to: string
  readonly type: string
  /** The recipient's BSUID, when the send named one. */
  readonly userId?: string | undefined
  /** The send's `category` (Direct Send), when given. */
  readonly category?: string | undefined
  readonly endpoint: SendEndpoint
}

/** What a queued send's record is written with: its id (the queue row's), its window and lane. */
interface QueuedInput extends OutboundInput {
  readonly id: string
  readonly sendAt: string
  readonly expiresAt: string
  readonly priority: Priority
}

/** What the send and the ingress write of message records, and what the endpoints read. */
interface MessagesRepoShape {
  /**
   * A `pending` outbound record without upstream id, written before the upstream is called. This and
   * markAcceptedNow are plain promises of their outcome, for the send core (see Send.ts).
   */
  readonly createOutboundNow: (input: OutboundInput) => Promise<Exit.Exit<MessageRow, SqlError>>
  /**
   * Queued sends' `pending` records, many rows per statement, run in the transaction that queues them
   * (SendQueue/QueuedSends.ts).
   */
  readonly insertQueued: (inputs: ReadonlyArray<QueuedInput>) => Effect.Effect<void, SqlError>
  /**
   * A queued send the queue gave up before Meta took it: `failed` with why, and Meta's error when it
   * answered one. A record Meta accepted or moved on is left as it is.
   */
  readonly markQueueFailed: (id: string, reason: FailureReason, error?: Json) => Effect.Effect<void, SqlError>
  /** People who stopped (or resumed) a business account's marketing messages (Messages/OptOuts.ts). */
  readonly recordOptOuts: (changes: ReadonlyArray<OptOutChange>) => Effect.Effect<void, SqlError>
  /** The upstream accepted the send: its message id is recorded; the status stays as events set it. */
  readonly markAcceptedNow: (id: string, waMessageId: string) => Promise<Exit.Exit<void, SqlError>>
  /**
   * As markAcceptedNow, for many sends, as a write to run in a transaction of the caller's: the
   * queue's outcomes record their acceptances in their own group commit (SendQueue/QueueEvents.ts).
   */
  readonly acceptAll: (
    accepted: ReadonlyArray<{ readonly id: string; readonly waMessageId: string }>
  ) => Effect.Effect<void, SqlError>
  /** The endpoint a template send goes to (Templates/Categories.ts): `via`, else the instance's setting and the template's category. */
  readonly templateEndpoint: (
    instanceId: InstanceId,
    template: { readonly name: string; readonly language: string },
    via: Via | undefined
  ) => Effect.Effect<SendEndpoint>
  /** Pairs of identifiers a send's answer named (Identities.ts), in a write of their own. */
  readonly learnIdentities: (links: ReadonlyArray<IdentityLink>) => Effect.Effect<void, SqlError>
  /** The upstream refused the send. */
  readonly markRefused: (id: string, error: Json) => Effect.Effect<void, SqlError>
  /** The outcome is unknown (no answer): the record stays pending, with the error noted. */
  readonly noteError: (id: string, error: Json) => Effect.Effect<void, SqlError>
  /**
   * Applies a group's status events and received messages as if one by one, in order (see
   * ChangePlan), with a few statements, and records its call events; run it in a transaction. Per
   * change: true when its status moved a record (false when unknown, late or repeated), or its
   * message was new; true for a call event, a pair of identifiers or a template's category.
   */
  readonly applyChanges: (changes: ReadonlyArray<RecordChange>) => Effect.Effect<ReadonlyArray<boolean>>
  readonly findById: (id: string) => Effect.Effect<MessageRow | undefined>
  readonly list: (filter: ListFilter) => Effect.Effect<ListPage>
}

/**
 * The records a group of changes names, by instance and upstream id: one lookup of the upstream id
 * index per pair (a test checks the plan). On PostgreSQL the rows are locked as read, in id order, so
 * a replica applying other changes to them waits and then plans from what this one wrote.
 */
export const storedRecordsQuery = (
  sql: SqlClient.SqlClient,
  named: ReadonlyArray<{ readonly instanceId: string; readonly waMessageId: string }>
) =>
  // Hand-typed, not decoded with a Schema: read in every ingress group's write (speed).
  sql<StoredRecord>`SELECT m.id, m.instance_id, m.wa_message_id, m.direction, m.status, m.error
    FROM ${jsonArrayRows(sql, JSON.stringify(named.map((r) => ({ i: r.instanceId, w: r.waMessageId }))), "k")}
    JOIN messages m ON m.instance_id = k.value ->> 'i' AND m.wa_message_id = k.value ->> 'w'${
    lockRead(sql, "m", "m.id")
  }`

/**
 * Folds each instance's count rows into one (PostgreSQL, where inserts add rows: migration 0010), in
 * one statement: rows added meanwhile are not in its snapshot and stay, so no count is lost. SQLite
 * keeps one row per instance and has nothing to fold.
 */
export const compactMessageCounts = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({
    pg: () =>
      Effect.asVoid(sql`WITH folded AS (DELETE FROM message_counts RETURNING instance_id, organization_id, total)
        INSERT INTO message_counts (instance_id, organization_id, total)
        SELECT instance_id, organization_id, SUM(total) FROM folded GROUP BY instance_id, organization_id`),
    orElse: () => Effect.void
  })

/** The row of a message the upstream told of (received, or sent elsewhere): its status as far as the hub knows it went. */
const receivedRow = (message: ReceivedMessage, now: string) => {
  const outbound = message.direction === "outbound"
  const status = outbound ? message.status ?? "sent" : INBOUND_STATUS
  return {
    id: newId("msg"),
    organization_id: message.organizationId,
    instance_id: message.instanceId,
    direction: outbound ? "outbound" : "inbound",
    wa_message_id: message.waMessageId,
    to_number: outbound ? message.party : null,
    from_number: outbound ? null : message.party,
    user_id: message.userId ?? null,
    parent_user_id: message.parentUserId ?? null,
    username: message.username ?? null,
    origin: message.origin ?? null,
    type: message.type,
    status,
    error: null,
    status_at: message.at,
    // What the upstream said of a sent one is as far as the hub knows it went. Every row has every
    // step's column: a group's rows are written with the first row's columns.
    ...Object.fromEntries(
      STEP_COLUMNS.map((column) => [column.name, outbound && column.status === status ? message.at : null])
    ),
    created_at: message.at,
    updated_at: now
  }
}

/**
 * Applies a group's changes to the records, inside the caller's transaction: identities, template
 * categories and call events, then statuses (forward only, early ones kept aside) and the messages
 * the upstream told of. Answers, per change, whether it was applied.
 */
const applyChanges = (sql: SqlClient.SqlClient, all: ReadonlyArray<RecordChange>) =>
  Effect.gen(function*() {
    if (all.length === 0) return []
    const now = nowIso()
    yield* learnIdentities(sql, all.flatMap((c) => (c._tag === "Identity" ? [c.link] : [])), now)
    yield* recordTemplateCategories(sql, all.flatMap((c) => (c._tag === "TemplateCategory" ? [c.category] : [])))
    yield* expireLevels(sql, all.flatMap((c) => (c._tag === "ThroughputUpgrade" ? [c.wabaId] : [])))
    yield* recordOptOuts(sql, all.flatMap((c) => (c._tag === "OptOut" ? [c] : [])))
    const calls = all.flatMap((c) => (c._tag === "Call" ? [c.event] : []))
    yield* recordCallEvents(sql, calls, now)
    const changes = all.filter((c): c is MessageChange => c._tag === "Status" || c._tag === "Received")
    if (changes.length === 0) return all.map(() => true)
    // Read then write inside the caller's transaction: SQLite has one writer at a time (a
    // Postgres layer would lock the rows it reads with FOR UPDATE).
    const named = namedRecords(changes)
    // See acceptAll: an acceptance of one of these ids on another replica is ordered with this.
    yield* lockNames(sql, named.map((r) => r.waMessageId))
    const stored = yield* storedRecordsQuery(sql, named)
    const plan = planChanges(changes, stored)
    if (plan.moves.length > 0) {
      yield* sql`UPDATE messages SET status = c.value ->> 'status', status_at = c.value ->> 'statusAt',
            error = c.value ->> 'error', updated_at = ${now},
            ${
        sql.literal(
          STEP_COLUMNS.map((column) =>
            `${column.name} = COALESCE(c.value ->> '${column.field}', messages.${column.name})`
          ).join(", ")
        )
      }
          FROM ${jsonArrayRows(sql, JSON.stringify(plan.moves), "c")}
          WHERE messages.id = c.value ->> 'id'`
    }
    // Early statuses kept aside; a queued send whose outcome was unknown reached Meta after all: its record takes the id.
    yield* keepEarly(sql, plan.early)
    // The upstream id index covers only records that have one (migration 0004): the target says so.
    yield* insertMany(
      sql,
      "messages",
      plan.received.map((message) => receivedRow(message, now)),
      "ON CONFLICT (instance_id, wa_message_id) WHERE wa_message_id IS NOT NULL DO NOTHING"
    )
    if (changes.length === all.length) {
      return plan.outcomes
    }
    let next = 0
    return all.map((c) => (c._tag === "Status" || c._tag === "Received" ? plan.outcomes[next++] ?? false : true))
  })

/**
 * Sends' records, many per statement (see WriteBatcher: the group writers). On PostgreSQL the group
 * is one JSON parameter (jsonRowsInsert): one statement text whatever the group's size. On SQLite one
 * `INSERT … VALUES` for the whole group, not insertMany's power-of-two chunks: with those the hub
 * spent 189–203 µs of CPU a send against 176–202 (SQLite's send benchmark, four alternating pairs,
 * 2026-11-28), and there the hub's one thread is what bounds the rate. A new record has no upstream id,
 * sender, error or status time yet: those columns keep their NULL default, off the statement.
 */
const outboundWriter = (sql: SqlClient.SqlClient, batcher: WriteBatcher["Type"]) =>
  batcher.groupNow((rows: ReadonlyArray<MessageRow>) => {
    const stored = rows.map(newRecord)
    return Effect.as(
      isPostgres(sql)
        ? jsonRowsInsert(sql, "messages", Object.keys(stored[0] ?? {}), stored)
        : sql`INSERT INTO messages ${sql.insert(stored)}`,
      rows
    )
  })

/** The columns a new send's record sets. */
const newRecord = (row: MessageRow) => ({
  id: row.id,
  organization_id: row.organization_id,
  instance_id: row.instance_id,
  direction: row.direction,
  to_number: row.to_number,
  type: row.type,
  status: row.status,
  created_at: row.created_at,
  updated_at: row.created_at,
  user_id: row.user_id,
  category: row.category,
  endpoint: row.endpoint
})

/**
 * On PostgreSQL, the records named also by their ids as an array, so that they are found through the
 * primary key whatever the table's size: joined to the JSON's rows alone (estimated at 100), a table
 * of under some 10,000 rows was read whole for each group instead (a hash join; 1.3 ms a group of 28
 * in the benchmark, 46 µs a send). SQLite looks each id up already.
 */
const byPrimaryKey = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>) =>
  isPostgres(sql)
    ? sql` AND messages.id = ANY(ARRAY(SELECT json_array_elements_text(${JSON.stringify(ids)}::json)))`
    : sql.literal("")

/**
 * Acceptances, many per statement; run it in a transaction. Status events rarely beat the
 * acceptance, so the statement also says for which records any did, and only those get a second
 * one (applyEarly). Each acceptance's own correlated subqueries made it twice as costly.
 */
const acceptAll = (
  sql: SqlClient.SqlClient,
  accepted: ReadonlyArray<{ readonly id: string; readonly waMessageId: string }>
) =>
  Effect.gen(function*() {
    if (accepted.length === 0) return
    // Replicas (PostgreSQL): an ingress storing an early status for one of these ids elsewhere
    // either commits first (then the EXISTS below sees it) or waits for this (then it finds the id).
    yield* lockNames(sql, accepted.map((r) => r.waMessageId))
    // Hand-typed, not decoded with a Schema: this is the send's hot path (speed). The CASE makes
    // `early` an integer on both engines (a bare EXISTS is 1 on SQLite, true on PostgreSQL).
    const rows = yield* sql<
      { readonly id: string; readonly wa_message_id: string; readonly early: 0 | 1 }
    >`UPDATE messages
        SET wa_message_id = a.value ->> 'wa', updated_at = ${nowIso()}
        FROM ${jsonArrayRows(sql, JSON.stringify(accepted.map((r) => ({ id: r.id, wa: r.waMessageId }))), "a")}
        WHERE messages.id = a.value ->> 'id'${byPrimaryKey(sql, accepted.map((r) => r.id))}
        RETURNING messages.id AS id, messages.wa_message_id AS wa_message_id, CASE WHEN EXISTS (SELECT 1 FROM message_status_backlog b
          WHERE b.instance_id = messages.instance_id AND b.wa_message_id = messages.wa_message_id) THEN 1 ELSE 0 END AS early`
    yield* Effect.forEach(
      rows,
      (row) => (row.early === 1 ? Effect.asVoid(applyEarly(sql, row.id, row.wa_message_id)) : Effect.void),
      { discard: true }
    )
  })

/** Synchronous sends' acceptances, a group's in one statement (see WriteBatcher: the group writers). */
const acceptanceWriter = (sql: SqlClient.SqlClient, batcher: WriteBatcher["Type"]) =>
  batcher.groupNow((accepted: ReadonlyArray<{ readonly id: string; readonly waMessageId: string }>) =>
    Effect.as(acceptAll(sql, accepted), accepted.map(() => undefined))
  )

/** A send's `pending` record, before the upstream is called: no upstream id, no status time yet. */
const outboundRow = (input: OutboundInput): MessageRow => ({
  id: newId("msg"),
  organization_id: input.organizationId,
  instance_id: input.instanceId,
  direction: "outbound",
  wa_message_id: null,
  to_number: input.to,
  from_number: null,
  type: input.type,
  status: "pending",
  error: null,
  created_at: nowIso(),
  status_at: null,
  sent_at: null,
  delivered_at: null,
  read_at: null,
  failed_at: null,
  user_id: input.userId ?? null,
  parent_user_id: null,
  username: null,
  category: input.category ?? null,
  endpoint: input.endpoint,
  origin: null,
  failure_reason: null,
  send_at: null,
  expires_at: null,
  priority: null
})

/**
 * A queued send's record: `pending`, with its id (the queue row's), window and lane. The columns a new
 * record leaves NULL are left out of the statement (seven fewer values to bind per row).
 */
const queuedRow = (input: QueuedInput, now: string) => ({
  id: input.id,
  organization_id: input.organizationId,
  instance_id: input.instanceId,
  direction: "outbound",
  to_number: input.to,
  type: input.type,
  status: "pending",
  created_at: now,
  updated_at: now,
  user_id: input.userId ?? null,
  category: input.category ?? null,
  endpoint: input.endpoint,
  send_at: input.sendAt,
  expires_at: input.expiresAt,
  priority: input.priority
})

const insertQueued = (sql: SqlClient.SqlClient, inputs: ReadonlyArray<QueuedInput>) =>
  Effect.suspend(() => {
    const now = nowIso()
    return Effect.forEach(
      powerOfTwoChunks(inputs),
      (chunk) => sql`INSERT INTO messages ${sql.insert(chunk.map((input) => queuedRow(input, now)))}`,
      { discard: true }
    )
  })

const markRefused = (sql: SqlClient.SqlClient, batcher: WriteBatcher["Type"], id: string, error: Json) =>
  Effect.suspend(() => {
    const now = nowIso()
    return batcher.runStatement(
      sql`UPDATE messages SET status = 'failed', status_at = ${now}, failed_at = ${now}, error = ${
        JSON.stringify(error)
      }, updated_at = ${now}
      WHERE id = ${id} AND wa_message_id IS NULL`
    )
  }).pipe(Effect.asVoid)

const noteError = (sql: SqlClient.SqlClient, batcher: WriteBatcher["Type"], id: string, error: Json) =>
  batcher.runStatement(sql`UPDATE messages SET error = ${JSON.stringify(error)}, updated_at = ${nowIso()}
    WHERE id = ${id} AND wa_message_id IS NULL`).pipe(Effect.asVoid)

export class MessagesRepo extends Effect.Service<MessagesRepo>()("MessagesRepo", {
  effect: Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batcher = yield* WriteBatcher
    const insertOutbound = outboundWriter(sql, batcher)
    const acceptances = acceptanceWriter(sql, batcher)
    const service: MessagesRepoShape = {
      createOutboundNow: (input) => written(insertOutbound, outboundRow(input)),
      insertQueued: (inputs) => insertQueued(sql, inputs),
      markQueueFailed: (id, reason, error) => markQueueFailed(sql, batcher, id, reason, error),
      recordOptOuts: (changes) => batcher.run(Effect.suspend(() => recordOptOuts(sql, changes))),
      markAcceptedNow: (id, waMessageId) => written(acceptances, { id, waMessageId }),
      acceptAll: (accepted) => acceptAll(sql, accepted),
      templateEndpoint: (instanceId, template, via) => templateEndpoint(sql, instanceId, template, via),
      learnIdentities: (links) => batcher.run(Effect.suspend(() => learnIdentities(sql, links, nowIso()))),
      markRefused: (id, error) => markRefused(sql, batcher, id, error),
      noteError: (id, error) => noteError(sql, batcher, id, error),
      applyChanges: (all) => Effect.orDie(applyChanges(sql, all)),
      findById: (id) =>
        messageRows(sql`SELECT ${sql.literal(messageColumns)} FROM messages WHERE id = ${id}`).pipe(
          Effect.map((rows) => rows[0]),
          Effect.orDie
        ),
      list: (filter) => Effect.orDie(listPage(sql, filter))
    }
    return service
  })
}) {}

/**
 * Broadcasts' SQL: `broadcasts` and `broadcast_recipients` (migration 0020). A recipient's status is its
 * send's record's (`messages`); cancelling marks it and names its sends, which the queue cancels (SendQueue/Cancel.ts).
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Schema } from "effect"
import { InstanceId, nowIso, OrganizationId } from "../Domain/Ids.js"
import { failureReasons, messageStatuses } from "../Domain/Vocabulary.js"
import { countRows, decodeRows, SqlBigint } from "../Sql/RowSchemas.js"

const BroadcastRow = Schema.Struct({
  id: Schema.String,
  organization_id: OrganizationId,
  instance_id: InstanceId,
  name: Schema.String,
  template: Schema.String,
  send_at: Schema.NullOr(Schema.String),
  validity: Schema.NullOr(Schema.Number),
  created_at: Schema.String,
  cancelled_at: Schema.NullOr(Schema.String)
})
export type BroadcastRow = typeof BroadcastRow.Type
const decodeBroadcasts = decodeRows(BroadcastRow)

/** Recipients by their send's status and why it failed or was skipped. */
const RecipientStatus = Schema.Literal(...messageStatuses, "skipped")
const RecipientReason = Schema.NullOr(Schema.Literal(...failureReasons, "opted_out", "failed"))
const TallyRow = Schema.Struct({ status: RecipientStatus, reason: RecipientReason, queued: SqlBigint, n: SqlBigint })
export type TallyEntry = typeof TallyRow.Type
const decodeTally = decodeRows(TallyRow)

const RecipientRow = Schema.Struct({
  party: Schema.String,
  seq: Schema.Number,
  message_id: Schema.NullOr(Schema.String),
  status: RecipientStatus,
  reason: RecipientReason
})
const decodeRecipients = decodeRows(RecipientRow)
const decodeParties = decodeRows(Schema.Struct({ party: Schema.String }))
const decodeMessageIds = decodeRows(Schema.Struct({ message_id: Schema.String }))
const decodeMax = decodeRows(Schema.Struct({ top: Schema.NullOr(SqlBigint) }))

/** A recipient's status (its send's, or `skipped`) and reason, as SQL over `r` (recipients) and `m` (messages). */
const STATUS = "COALESCE(m.status, 'skipped')"
const REASON = "COALESCE(r.skipped_reason, m.failure_reason, CASE WHEN m.status = 'failed' THEN 'failed' ELSE NULL END)"

export interface NewRecipient {
  readonly party: string
  readonly messageId: string | null
  readonly skippedReason: string | null
}

export class BroadcastsRepo extends Effect.Service<BroadcastsRepo>()("BroadcastsRepo", {
  effect: Effect.map(SqlClient.SqlClient, (sql) => {
    const insert = (row: BroadcastRow): Effect.Effect<void, SqlError.SqlError> =>
      sql`INSERT INTO broadcasts ${sql.insert(row)}`.pipe(Effect.asVoid)

    const find = (id: string) =>
      Effect.map(decodeBroadcasts(sql`SELECT * FROM broadcasts WHERE id = ${id}`), (rows) => rows[0])

    /** A page of broadcasts, newest first, after the one `after` names (its cursor). */
    const list = (query: {
      readonly organizationId: string
      readonly instanceId: string | undefined
      readonly after: string | undefined
      readonly limit: number
    }) =>
      decodeBroadcasts(
        sql`SELECT * FROM broadcasts WHERE organization_id = ${query.organizationId}${
          query.instanceId === undefined ? sql`` : sql` AND instance_id = ${query.instanceId}`
        }${
          query.after === undefined
            ? sql``
            : sql` AND (created_at, id) < (SELECT created_at, id FROM broadcasts WHERE id = ${query.after})`
        } ORDER BY created_at DESC, id DESC LIMIT ${query.limit}`
      )

    /** Which of `parties` the broadcast holds already. */
    const existing = (broadcastId: string, parties: ReadonlyArray<string>) =>
      parties.length === 0 ? Effect.succeed(new Set<string>()) : Effect.map(
        decodeParties(sql`SELECT party FROM broadcast_recipients WHERE broadcast_id = ${broadcastId}
          AND ${sql.in("party", [...parties])}`),
        (rows) => new Set(rows.map((row) => row.party))
      )

    const recipientCount = (broadcastId: string) =>
      Effect.map(
        countRows(sql`SELECT COUNT(*) AS n FROM broadcast_recipients WHERE broadcast_id = ${broadcastId}`),
        (rows) => rows[0]?.n ?? 0
      )

    /** Adds recipients after the broadcast's last (run in the transaction that queues their sends). */
    const insertRecipients = (broadcastId: string, recipients: ReadonlyArray<NewRecipient>) =>
      Effect.gen(function*() {
        if (recipients.length === 0) return
        const [top] = yield* decodeMax(
          sql`SELECT MAX(seq) AS top FROM broadcast_recipients WHERE broadcast_id = ${broadcastId}`
        )
        const first = (top?.top ?? 0) + 1
        const now = nowIso()
        yield* sql`INSERT INTO broadcast_recipients ${
          sql.insert(recipients.map((r, i) => ({
            broadcast_id: broadcastId,
            party: r.party,
            seq: first + i,
            message_id: r.messageId,
            skipped_reason: r.skippedReason,
            created_at: now
          })))
        }`
      })

    const tally = (broadcastId: string) =>
      decodeTally(sql`SELECT ${sql.literal(STATUS)} AS status, ${sql.literal(REASON)} AS reason,
          SUM(CASE WHEN q.message_id IS NULL THEN 0 ELSE 1 END) AS queued, COUNT(*) AS n
        FROM broadcast_recipients r LEFT JOIN messages m ON m.id = r.message_id
          LEFT JOIN send_queue q ON q.message_id = r.message_id
        WHERE r.broadcast_id = ${broadcastId}
        GROUP BY ${sql.literal(STATUS)}, ${sql.literal(REASON)}`)

    const recipients = (input: {
      readonly broadcastId: string
      readonly status: string | undefined
      readonly after: number
      readonly limit: number
    }) =>
      decodeRecipients(sql`SELECT r.party, r.seq, r.message_id, ${sql.literal(STATUS)} AS status,
          ${sql.literal(REASON)} AS reason
        FROM broadcast_recipients r LEFT JOIN messages m ON m.id = r.message_id
        WHERE r.broadcast_id = ${input.broadcastId} AND r.seq > ${input.after}
          ${input.status === undefined ? sql`` : sql`AND ${sql.literal(STATUS)} = ${input.status}`}
        ORDER BY r.seq LIMIT ${input.limit}`)

    /**
     * Cancels the broadcast: marked cancelled, its sends that have not begun taken off the queue and their
     * records failed as cancelled (those being sent go on; those made stay), in one transaction.
     */
    /** Marks the broadcast cancelled (it takes no more recipients); answers its sends' message ids. */
    const cancel = (broadcastId: string) =>
      Effect.zipRight(
        sql`UPDATE broadcasts SET cancelled_at = ${nowIso()} WHERE id = ${broadcastId} AND cancelled_at IS NULL`,
        Effect.map(
          decodeMessageIds(sql`SELECT message_id FROM broadcast_recipients
            WHERE broadcast_id = ${broadcastId} AND message_id IS NOT NULL`),
          (rows) => rows.map((row) => row.message_id)
        )
      )

    return { insert, find, list, existing, recipientCount, insertRecipients, tally, recipients, cancel } as const
  })
}) {}

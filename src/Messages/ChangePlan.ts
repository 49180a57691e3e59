/**
 * What a group of upstream changes does to message records, worked out in memory from the records
 * as stored, so the group is written with a few statements whatever its size (each statement costs
 * about 15 µs through @effect/sql, far more than a row). The outcome is exactly that of applying the
 * changes one by one, in the order received:
 * - a status moves an outbound record forward only (see statusRank); each move sets the status and
 *   its time, the time of that step (sent, delivered, read, failed: every step the group makes, not
 *   only its last), and the move's upstream error if it has one (an earlier error is otherwise kept);
 * - a status for an id no record has yet is kept as early (its send is still being recorded);
 * - a message the upstream told of (inbound, or an echo or history of one the business sent
 *   elsewhere) is recorded once per instance and upstream id: one the hub already has is left as it is.
 */
import type { Direction, MessageStatus } from "../Domain/Vocabulary.js"
import type { ReceivedMessage, StatusUpdate } from "./Records.js"

/**
 * The order statuses move in. `failed` ranks above every state but `read`, so it is reached from any
 * of them, while `read` (proof of arrival) and `failed` itself are never left for a lower rank.
 */
export const statusRank: Record<MessageStatus, number> = { pending: 0, sent: 1, delivered: 2, failed: 3, read: 4 }

/** One thing an upstream change does to message records. */
export type MessageChange =
  | { readonly _tag: "Status"; readonly update: StatusUpdate }
  | { readonly _tag: "Received"; readonly message: ReceivedMessage }

/** A record some change of the group names (by instance and upstream id), as stored. */
export interface StoredRecord {
  readonly id: string
  readonly instance_id: string
  readonly wa_message_id: string
  readonly direction: Direction
  readonly status: MessageStatus
  readonly error: string | null
}

/** An outbound record's state after the group (written only for records that moved). */
interface RecordMove {
  readonly id: string
  readonly status: MessageStatus
  readonly statusAt: string
  /** The upstream error as JSON text. */
  readonly error: string | null
  /** When the group moved the record to each step (null: not in this group). */
  readonly sentAt: string | null
  readonly deliveredAt: string | null
  readonly readAt: string | null
  readonly failedAt: string | null
}

/** A status for an id no record has yet. */
export interface EarlyStatus {
  readonly instanceId: string
  readonly waMessageId: string
  readonly status: MessageStatus
  readonly rank: number
  readonly at: string
  readonly error: string | null
  /** The person the status names (their number, their business-scoped user id). */
  readonly recipients: ReadonlyArray<string>
}

export interface ChangePlan {
  readonly moves: ReadonlyArray<RecordMove>
  readonly early: ReadonlyArray<EarlyStatus>
  readonly received: ReadonlyArray<ReceivedMessage>
  /** Per change, in order: whether its status moved a record, or its message was new. */
  readonly outcomes: ReadonlyArray<boolean>
}

const keyOf = (instanceId: string, waMessageId: string) => `${instanceId}\u0000${waMessageId}`

/** The (instance, upstream id) pairs the changes name, once each. */
export const namedRecords = (changes: ReadonlyArray<MessageChange>) => {
  const named = new Map<string, { readonly instanceId: string; readonly waMessageId: string }>()
  for (const change of changes) {
    const { instanceId, waMessageId } = change._tag === "Status" ? change.update : change.message
    named.set(keyOf(instanceId, waMessageId), { instanceId, waMessageId })
  }
  return [...named.values()]
}

interface Outbound {
  readonly id: string
  rank: number
  move: RecordMove | undefined
  error: string | null
  readonly steps: Partial<Record<MessageStatus, string>>
}

export const planChanges = (changes: ReadonlyArray<MessageChange>, stored: ReadonlyArray<StoredRecord>): ChangePlan => {
  // Every id a record holds (inbound ones block early statuses too); outbound records can move.
  const held = new Set<string>()
  const outbound = new Map<string, Outbound>()
  for (const record of stored) {
    const key = keyOf(record.instance_id, record.wa_message_id)
    held.add(key)
    if (record.direction === "outbound") {
      outbound.set(key, {
        id: record.id,
        rank: statusRank[record.status],
        move: undefined,
        error: record.error,
        steps: {}
      })
    }
  }
  const early = new Map<string, EarlyStatus>()
  const received: Array<ReceivedMessage> = []
  const outcomes = changes.map((change) => {
    if (change._tag === "Received") {
      const key = keyOf(change.message.instanceId, change.message.waMessageId)
      if (held.has(key)) return false
      held.add(key)
      received.push(change.message)
      return true
    }
    const update = change.update
    const key = keyOf(update.instanceId, update.waMessageId)
    const rank = statusRank[update.status]
    const error = update.error === undefined ? null : JSON.stringify(update.error)
    const record = outbound.get(key)
    if (record !== undefined) {
      if (rank <= record.rank) return false
      record.rank = rank
      record.error = error ?? record.error
      record.steps[update.status] = update.at
      record.move = {
        id: record.id,
        status: update.status,
        statusAt: update.at,
        error: record.error,
        sentAt: record.steps.sent ?? null,
        deliveredAt: record.steps.delivered ?? null,
        readAt: record.steps.read ?? null,
        failedAt: record.steps.failed ?? null
      }
      return true
    }
    // The first early event per id and status is kept, as the backlog's key does.
    const earlyKey = `${key}\u0000${update.status}`
    if (!held.has(key) && !early.has(earlyKey)) {
      early.set(earlyKey, {
        instanceId: update.instanceId,
        waMessageId: update.waMessageId,
        status: update.status,
        rank,
        at: update.at,
        error,
        recipients: update.recipients ?? []
      })
    }
    return false
  })
  const moves = [...outbound.values()].flatMap((record) => (record.move === undefined ? [] : [record.move]))
  return { moves, early: [...early.values()], received, outcomes }
}

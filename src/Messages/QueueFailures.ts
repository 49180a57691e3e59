/**
 * The record of a queued send the queue gave up before Meta took it (SendQueue/): `failed` with why, and
 * Meta's error when it answered one. A record Meta accepted or moved on is left as it is.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { nowIso } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"
import type { FailureReason } from "../Domain/Vocabulary.js"
import type { WriteBatcher } from "../Sql/WriteBatcher.js"

export const markQueueFailed = (
  sql: SqlClient.SqlClient,
  batcher: WriteBatcher["Type"],
  id: string,
  reason: FailureReason,
  error: Json | undefined
) =>
  Effect.suspend(() => {
    const now = nowIso()
    return batcher.runStatement(
      sql`UPDATE messages SET status = 'failed', failure_reason = ${reason}, status_at = ${now}, failed_at = ${now},
        error = ${error === undefined ? null : JSON.stringify(error)}, updated_at = ${now}
      WHERE id = ${id} AND status = 'pending' AND wa_message_id IS NULL`
    )
  }).pipe(Effect.asVoid)

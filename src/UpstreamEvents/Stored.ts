/**
 * Stored events (the events rows) read back in the order they arrived, (received_at, id), through
 * events_instance_received; and each as the ingress wrote it, so a replay or a poll selects it
 * for a webhook's filter exactly as the ingress did (Delivery/Enqueue.ts bodyFor): its changes, the
 * body of a subset of them, and the hub's own kinds. A test event is its webhook's alone: it is never
 * selected again.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Either } from "effect"
import type { EventRecord } from "../Delivery/Records.js"
import { QUEUE_EVENT_KIND, TEST_EVENT_KIND } from "../Domain/EventKinds.js"
import { parseJsonObject } from "../Domain/Json.js"
import type { Keyset } from "../Domain/Paging.js"
import { envelopeFor, parseEnvelope } from "./Envelope.js"

/** The event as the ingress saw it; undefined for a test event. */
export const storedEventRecord = (
  instanceId: string,
  row: { readonly id: string; readonly body: string }
): EventRecord | undefined => {
  const payload = parseJsonObject(row.body)
  const parsed = payload === undefined ? undefined : parseEnvelope(payload)
  const base = { id: row.id, instanceId, body: row.body }
  // Stored bodies are envelopes the ingress built; were one not, every webhook that takes all kinds takes it whole.
  if (parsed === undefined || Either.isLeft(parsed)) return { ...base, changeCount: 1 }
  const envelope = parsed.right
  if (envelope.object === TEST_EVENT_KIND) return undefined
  return {
    ...base,
    changeCount: envelope.changes.length,
    filterable: {
      changes: envelope.changes,
      bodyOf: (indices) => envelopeFor(envelope.object, indices.flatMap((i) => envelope.changes[i] ?? []))
    },
    ...(envelope.object === QUEUE_EVENT_KIND ? { onlyToNamed: QUEUE_EVENT_KIND } : {})
  }
}

/** A stored event as a replay or a poll reads it. */
export interface StoredEvent {
  readonly id: string
  readonly body: string
  readonly received_at: string
}

/** Which stored events to read: an instance's received in [since, until), after a place in their order, at most `limit`. */
export interface StoredEventsRequest {
  readonly instanceId: string
  readonly since: string
  readonly until: string
  readonly after: Keyset | undefined
  readonly limit: number
}

/** The events of the request, oldest first. */
export const storedEventsAfter = (sql: SqlClient.SqlClient, input: StoredEventsRequest) =>
  sql<StoredEvent>`SELECT id, body, received_at FROM events
    WHERE instance_id = ${input.instanceId} AND received_at >= ${input.since} AND received_at < ${input.until}
      ${
    input.after === undefined
      ? sql``
      : sql`AND (received_at > ${input.after.createdAt} OR (received_at = ${input.after.createdAt} AND id > ${input.after.id}))`
  }
    ORDER BY received_at, id LIMIT ${input.limit}`.pipe(Effect.orDie)

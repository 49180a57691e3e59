/**
 * A stored event (its events row) read back as the ingress wrote it, so a replay or a poll selects it
 * for a webhook's filter exactly as the ingress did (Delivery/Enqueue.ts bodyFor): its changes, the
 * body of a subset of them, and the hub's own kinds. A test event is its webhook's alone: it is never
 * selected again.
 */
import { Either } from "effect"
import type { EventRecord } from "../Delivery/Records.js"
import { QUEUE_EVENT_KIND, TEST_EVENT_KIND } from "../Domain/EventKinds.js"
import { parseJsonObject } from "../Domain/Json.js"
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

/**
 * The records the webhooks endpoints answer (Api.ts's WebhookRecord, Delivery and DeliveryList),
 * built from the rows the repositories read.
 */
import { hourOf } from "../Delivery/AttemptLog.js"
import { ALL_KINDS } from "../Domain/EventKinds.js"
import { cursorsOf, encodeCursor, type PageRequest } from "../Domain/Paging.js"
import { shownHeaders } from "./CustomHeaders.js"
import type { DeliveryHealth } from "./Deliveries.js"
import type { AttemptRow, DeliveryRow, LogPage } from "./DeliveryLog.js"
import type { WebhookRow } from "./Repo.js"

/** The health of a webhook that has had no delivery. */
export const NO_DELIVERIES: DeliveryHealth = {
  succeeded: 0,
  failed: 0,
  dead: 0,
  lastSuccessAt: null,
  pending: 0,
  retrying: 0,
  held: 0,
  queuedCapped: false
}

/** The first of the 24 hourly buckets the health counts: the current hour and the 23 before it. */
export const healthSince = () => hourOf(new Date(Date.now() - 23 * 3600_000).toISOString())

export const webhookRecord = (row: WebhookRow, health: DeliveryHealth) => ({
  id: row.id,
  instance_id: row.instance_id,
  url: row.url,
  kind: row.kind,
  name: row.name,
  active: row.active,
  events: row.events ?? [ALL_KINDS],
  headers: shownHeaders(row.headers),
  ordering: row.ordering,
  disabled_reason: row.disabled_reason,
  failing_since: row.failing_since,
  last_success_at: health.lastSuccessAt,
  deliveries_24h: { succeeded: health.succeeded, failed: health.failed, dead: health.dead },
  queued: {
    pending: health.pending,
    failed: health.retrying,
    held: health.held,
    ...(health.queuedCapped ? { capped: true } : {})
  },
  created_at: row.created_at,
  updated_at: row.updated_at
})

/** A delivery with its attempts: those of `attempts` that are its own. */
export const deliveryRecord = (row: DeliveryRow, attempts: ReadonlyArray<AttemptRow>) => ({
  id: row.id,
  webhook_id: row.webhook_id,
  event_id: row.event_id,
  message_id: row.message_id,
  status: row.status,
  attempts: row.attempts,
  next_attempt_at: row.next_attempt_at,
  last_status_code: row.last_status_code,
  last_error: row.last_error,
  created_at: row.created_at,
  updated_at: row.updated_at,
  attempt_log: attempts.filter((a) => a.delivery_id === row.id).map((a) => ({
    attempt: a.attempt,
    started_at: a.started_at,
    status_code: a.status_code,
    latency_ms: a.latency_ms,
    error: a.error,
    response_snippet: a.response_snippet
  }))
})

/** A page of the delivery log as answered: the spec's envelope, the cap flag and the cursors. */
export const deliveryListRecord = (
  listed: LogPage,
  query: { readonly page: number; readonly limit: number },
  page: PageRequest
) => {
  const cursors = cursorsOf(listed.rows, listed.more, page)
  return {
    data: listed.rows.map((row) => deliveryRecord(row, listed.attempts)),
    total: listed.total,
    page: query.page,
    limit: query.limit,
    ...(listed.totalCapped ? { total_capped: true } : {}),
    // A page after a cursor that examined a window and found nothing goes on from where it stopped.
    cursors: listed.examinedTo === undefined ? cursors : { ...cursors, after: encodeCursor(listed.examinedTo) }
  }
}

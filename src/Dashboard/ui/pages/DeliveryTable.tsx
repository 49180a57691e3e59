/**
 * The table both delivery logs show (a webhook's own and the organization-wide search): each
 * delivery with its attempts, folded until asked for, and a button to send a finished one again.
 */
import { useState } from "preact/hooks"
import { type ApiError, call } from "../api.js"
import { Badge, Time, type Tone } from "../components.js"
import { Link } from "../router.js"
import type { DeliveryAttempt, Webhook, WebhookDelivery } from "../types.js"

/** Deliveries a page shows unless asked for another number. */
export const DELIVERY_PAGE_SIZE = 20
/** While a delivery on the page is queued, the page looks again this often. */
export const DELIVERY_POLL_MS = 1500

export const deliveryTone = (status: string): Tone =>
  status === "succeeded"
    ? "ok"
    : status === "dead"
    ? "bad"
    : status === "failed"
    ? "warn"
    : status === "pending"
    ? "info"
    : "neutral"

export const isQueued = (delivery: WebhookDelivery) => delivery.status === "pending" || delivery.status === "failed"

/** One attempt's answer, in words. */
export const answerOf = (attempt: DeliveryAttempt) =>
  attempt.status_code === null
    ? <Badge tone="bad">no answer</Badge>
    : (
      <Badge tone={attempt.status_code >= 200 && attempt.status_code < 300 ? "ok" : "bad"}>
        HTTP {attempt.status_code}
      </Badge>
    )

const Attempts = (props: { readonly delivery: WebhookDelivery }) => (
  <table class="attempts">
    <caption>
      Attempts of {props.delivery.message_id} <span class="muted small">(event {props.delivery.event_id})</span>
    </caption>
    <thead>
      <tr>
        <th scope="col">#</th>
        <th scope="col">Started</th>
        <th scope="col">Answer</th>
        <th scope="col">Latency</th>
        <th scope="col">Error or answer body</th>
      </tr>
    </thead>
    <tbody>
      {props.delivery.attempt_log.map((attempt: DeliveryAttempt) => (
        <tr key={attempt.attempt}>
          <td data-label="#">{attempt.attempt}</td>
          <td data-label="Started">
            <Time iso={attempt.started_at} />
          </td>
          <td data-label="Answer">{answerOf(attempt)}</td>
          <td data-label="Latency">{attempt.latency_ms} ms</td>
          <td data-label="Error or answer body" class="mono small wrap">
            {attempt.error ?? attempt.response_snippet ?? ""}
          </td>
        </tr>
      ))}
    </tbody>
  </table>
)

/**
 * One delivery: its row, and under it its attempts when unfolded. `webhooks`, when given, names its
 * webhook (the organization-wide search).
 */
const DeliveryRow = (props: {
  readonly delivery: WebhookDelivery
  readonly webhooks: ReadonlyMap<string, Webhook> | undefined
  readonly columns: number
  readonly open: boolean
  readonly onToggle: () => void
  readonly retryable: boolean
  readonly onRetry: () => void
}) => {
  const { delivery } = props
  const webhook = props.webhooks?.get(delivery.webhook_id)
  return (
    <tbody class="delivery">
      <tr>
        <td data-label="Created">
          <Time iso={delivery.created_at} />
        </td>
        {props.webhooks === undefined ? null : (
          <td data-label="Webhook">
            {webhook === undefined
              ? <span class="mono">{delivery.webhook_id}</span>
              : <Link to={`/webhooks/${webhook.id}`}>{webhook.name}</Link>}
          </td>
        )}
        <td data-label="Status">
          <Badge tone={deliveryTone(delivery.status)}>{delivery.status}</Badge>
        </td>
        <td data-label="Attempts">
          <button
            type="button"
            class="link"
            aria-expanded={props.open}
            aria-controls={`attempts-${delivery.id}`}
            onClick={props.onToggle}
          >
            {delivery.attempts} {delivery.attempts === 1 ? "attempt" : "attempts"}
          </button>
        </td>
        <td data-label="Last answer">
          {delivery.last_status_code === null
            ? (delivery.last_error === null ? "—" : "no answer")
            : `HTTP ${delivery.last_status_code}`}
        </td>
        <td data-label="Next attempt">
          <Time iso={delivery.next_attempt_at} />
        </td>
        <td data-label="webhook-id" class="mono truncate" title={delivery.message_id}>{delivery.message_id}</td>
        <td data-label="Actions" class="actions">
          <button
            type="button"
            class="secondary"
            disabled={!props.retryable}
            aria-label={`Retry ${delivery.message_id}`}
            onClick={props.onRetry}
          >
            Retry
          </button>
        </td>
      </tr>
      {props.open
        ? (
          <tr id={`attempts-${delivery.id}`} class="attempts-row">
            <td colSpan={props.columns}>
              {delivery.attempt_log.length === 0
                ? <p class="muted">No attempt yet.</p>
                : <Attempts delivery={delivery} />}
            </td>
          </tr>
        )
        : null}
    </tbody>
  )
}

/**
 * Deliveries with their attempts (folded until asked for) and a retry button each. `webhooks`, when
 * given, names each row's webhook (the organization-wide search).
 */
export const DeliveryTable = (props: {
  readonly caption: string
  readonly deliveries: ReadonlyArray<WebhookDelivery>
  readonly webhooks?: ReadonlyMap<string, Webhook>
  /** A delivery is sent again only to an active webhook (the API refuses otherwise). */
  readonly toActive: (delivery: WebhookDelivery) => boolean
  readonly onRetry: (delivery: WebhookDelivery) => void
  readonly empty: string
}) => {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set())
  const toggle = (id: string) => {
    const next = new Set(open)
    if (next.has(id)) next.delete(id)
    else next.add(id)
    setOpen(next)
  }
  const columns = props.webhooks === undefined ? 7 : 8
  return (
    <div class="table-wrap">
      <table class="responsive deliveries">
        <caption class="visually-hidden">{props.caption}</caption>
        <thead>
          <tr>
            <th scope="col">Created</th>
            {props.webhooks === undefined ? null : <th scope="col">Webhook</th>}
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last answer</th>
            <th scope="col">Next attempt</th>
            <th scope="col">webhook-id</th>
            <th scope="col">
              <span class="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        {props.deliveries.map((delivery) => (
          <DeliveryRow
            key={delivery.id}
            delivery={delivery}
            webhooks={props.webhooks}
            columns={columns}
            open={open.has(delivery.id)}
            onToggle={() => toggle(delivery.id)}
            retryable={!isQueued(delivery) && props.toActive(delivery)}
            onRetry={() => props.onRetry(delivery)}
          />
        ))}
      </table>
      {props.deliveries.length === 0 ? <p class="muted">{props.empty}</p> : null}
    </div>
  )
}

/** Sends a finished delivery again; the outcome or the API's refusal, for the page to show. */
export const useRetry = (afterwards: () => Promise<void>) => {
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const retry = async (delivery: WebhookDelivery) => {
    setError(undefined)
    setOutcome(undefined)
    const result = await call<WebhookDelivery>(
      "POST",
      `/api/webhooks/${delivery.webhook_id}/deliveries/${delivery.id}/retry`
    )
    if (!result.ok) return setError(result.error)
    setOutcome(`Delivery ${delivery.message_id} is queued again, with the same webhook-id.`)
    await afterwards()
  }
  return { retry, outcome, error }
}

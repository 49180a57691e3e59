import { useEffect, useState } from "preact/hooks"
import { type ApiError, call } from "../api.js"
import { Badge, ErrorNote, Outcome, Pager, Resource, Time, type Tone, useResource } from "../components.js"
import { useLiveFeed } from "../live.js"
import type { Deliveries, DeliveryAttempt, Webhook, WebhookDelivery } from "../types.js"

const STATUSES = ["pending", "failed", "succeeded", "dead", "cancelled"]
const PAGE_SIZE = 20
/** While a delivery on the page is queued, the page looks again this often. */
const POLL_MS = 1500

const deliveryTone = (status: string): Tone =>
  status === "succeeded" ? "ok" : status === "dead" ? "bad" : status === "failed" ? "warn" : status === "pending" ? "info" : "neutral"

const isQueued = (delivery: WebhookDelivery) => delivery.status === "pending" || delivery.status === "failed"

const Attempts = (props: { readonly delivery: WebhookDelivery }) => (
  <table class="attempts">
    <caption>Attempts of {props.delivery.message_id}</caption>
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
          <td data-label="Started"><Time iso={attempt.started_at} /></td>
          <td data-label="Answer">
            {attempt.status_code === null
              ? <Badge tone="bad">no answer</Badge>
              : <Badge tone={attempt.status_code >= 200 && attempt.status_code < 300 ? "ok" : "bad"}>HTTP {attempt.status_code}</Badge>}
          </td>
          <td data-label="Latency">{attempt.latency_ms} ms</td>
          <td data-label="Error or answer body" class="mono small wrap">{attempt.error ?? attempt.response_snippet ?? ""}</td>
        </tr>
      ))}
    </tbody>
  </table>
)

/** The delivery log of a webhook: every delivery with its attempts; one can be sent again. */
export const DeliveryLog = (props: { readonly webhook: Webhook }) => {
  const [status, setStatus] = useState("")
  const [page, setPage] = useState(1)
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set())
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const query = { page, limit: PAGE_SIZE, status }
  const deliveries = useResource(
    () => call<Deliveries>("GET", `/api/webhooks/${props.webhook.id}/deliveries`, { query }),
    `${props.webhook.id} ${JSON.stringify(query)}`
  )
  const { entries } = useLiveFeed()
  const newest = entries[0]

  // A new event for the webhook's instance has just queued a delivery: show it.
  useEffect(() => {
    if (newest?.kind === "event" && newest.event.instanceId === props.webhook.instance_id) void deliveries.reload()
  }, [newest])

  // Queued deliveries change on their own (attempts, retries): look again until none is.
  const queued = deliveries.loaded.state === "ready" && deliveries.loaded.value.data.some(isQueued)
  useEffect(() => {
    if (!queued) return
    const timer = setTimeout(() => void deliveries.reload(), POLL_MS)
    return () => clearTimeout(timer)
  }, [deliveries.loaded])

  const toggle = (id: string) => {
    const next = new Set(open)
    if (next.has(id)) next.delete(id)
    else next.add(id)
    setOpen(next)
  }

  const retry = async (delivery: WebhookDelivery) => {
    setError(undefined)
    setOutcome(undefined)
    const result = await call<WebhookDelivery>("POST", `/api/webhooks/${props.webhook.id}/deliveries/${delivery.id}/retry`)
    if (!result.ok) return setError(result.error)
    setOutcome(`Delivery ${delivery.message_id} is queued again, with the same webhook-id.`)
    await deliveries.reload()
  }

  return (
    <div class="stack">
      <div class="toolbar">
        <div class="field inline">
          <label for="delivery-status">Status</label>
          <select
            id="delivery-status"
            value={status}
            onChange={(e) => {
              setStatus(e.currentTarget.value)
              setPage(1)
            }}
          >
            <option value="">Any</option>
            {STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <button type="button" class="secondary" onClick={() => void deliveries.reload()}>Refresh</button>
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Not sent again:" />
      <Resource loaded={deliveries.loaded} what="the deliveries">
        {(list) => (
          <>
            <div class="table-wrap">
              <table class="responsive deliveries">
                <caption class="visually-hidden">Deliveries to {props.webhook.name}</caption>
                <thead>
                  <tr>
                    <th scope="col">Created</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col">Last answer</th>
                    <th scope="col">Next attempt</th>
                    <th scope="col">webhook-id</th>
                    <th scope="col"><span class="visually-hidden">Actions</span></th>
                  </tr>
                </thead>
                {list.data.map((delivery) => (
                  <tbody key={delivery.id} class="delivery">
                    <tr>
                      <td data-label="Created"><Time iso={delivery.created_at} /></td>
                      <td data-label="Status"><Badge tone={deliveryTone(delivery.status)}>{delivery.status}</Badge></td>
                      <td data-label="Attempts">
                        <button
                          type="button"
                          class="link"
                          aria-expanded={open.has(delivery.id)}
                          aria-controls={`attempts-${delivery.id}`}
                          onClick={() => toggle(delivery.id)}
                        >
                          {delivery.attempts} {delivery.attempts === 1 ? "attempt" : "attempts"}
                        </button>
                      </td>
                      <td data-label="Last answer">
                        {delivery.last_status_code === null ? (delivery.last_error === null ? "—" : "no answer") : `HTTP ${delivery.last_status_code}`}
                      </td>
                      <td data-label="Next attempt"><Time iso={delivery.next_attempt_at} /></td>
                      <td data-label="webhook-id" class="mono truncate" title={delivery.message_id}>{delivery.message_id}</td>
                      <td data-label="Actions" class="actions">
                        <button
                          type="button"
                          class="secondary"
                          disabled={isQueued(delivery) || !props.webhook.active}
                          aria-label={`Retry ${delivery.message_id}`}
                          onClick={() => void retry(delivery)}
                        >
                          Retry
                        </button>
                      </td>
                    </tr>
                    {open.has(delivery.id)
                      ? (
                        <tr id={`attempts-${delivery.id}`} class="attempts-row">
                          <td colSpan={7}>
                            {delivery.attempt_log.length === 0 ? <p class="muted">No attempt yet.</p> : <Attempts delivery={delivery} />}
                          </td>
                        </tr>
                      )
                      : null}
                  </tbody>
                ))}
              </table>
              {list.data.length === 0 ? <p class="muted">No deliveries{status === "" ? " yet" : ` with status ${status}`}.</p> : null}
            </div>
            <Pager page={list.page} limit={list.limit} total={list.total} noun={["delivery", "deliveries"]} onPage={setPage} />
          </>
        )}
      </Resource>
    </div>
  )
}

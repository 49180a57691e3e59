/**
 * Delivery logs: a webhook's own (on its page) and the organization-wide search (GET
 * /api/deliveries), both newest first with every attempt, paged by the answers' cursors; a finished
 * delivery can be sent again.
 */
import { useEffect, useState } from "preact/hooks"
import { deliveryStatuses } from "../../../Domain/Vocabulary.js"
import { type ApiError, call, pathWith } from "../api.js"
import {
  Badge,
  ErrorNote,
  isoOfLocalInput,
  localInputOf,
  localZone,
  Outcome,
  Pager,
  PageTitle,
  Resource,
  Time,
  type Tone,
  usePolling,
  useResource
} from "../components.js"
import { useLiveFeed } from "../live.js"
import { FIRST_PAGE, type PagePlace, pageQuery, placeOf, placeParams } from "../paging.js"
import { Link, navigate, useLocation } from "../router.js"
import type { Deliveries, DeliveryAttempt, Instance, TokenKind, Webhook, WebhookDelivery } from "../types.js"
import { useInstances } from "./Webhooks.js"

const PAGE_SIZE = 20
const LIMITS = [10, 20, 50, 100]
/** While a delivery on the page is queued, the page looks again this often. */
const POLL_MS = 1500

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

const isQueued = (delivery: WebhookDelivery) => delivery.status === "pending" || delivery.status === "failed"

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
 * Deliveries with their attempts (folded until asked for) and a retry button each. `webhooks`, when
 * given, names each row's webhook (the organization-wide search).
 */
const DeliveryTable = (props: {
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
        {props.deliveries.map((delivery) => {
          const webhook = props.webhooks?.get(delivery.webhook_id)
          return (
            <tbody key={delivery.id} class="delivery">
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
                    aria-expanded={open.has(delivery.id)}
                    aria-controls={`attempts-${delivery.id}`}
                    onClick={() => toggle(delivery.id)}
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
                    disabled={isQueued(delivery) || !props.toActive(delivery)}
                    aria-label={`Retry ${delivery.message_id}`}
                    onClick={() => props.onRetry(delivery)}
                  >
                    Retry
                  </button>
                </td>
              </tr>
              {open.has(delivery.id)
                ? (
                  <tr id={`attempts-${delivery.id}`} class="attempts-row">
                    <td colSpan={columns}>
                      {delivery.attempt_log.length === 0
                        ? <p class="muted">No attempt yet.</p>
                        : <Attempts delivery={delivery} />}
                    </td>
                  </tr>
                )
                : null}
            </tbody>
          )
        })}
      </table>
      {props.deliveries.length === 0 ? <p class="muted">{props.empty}</p> : null}
    </div>
  )
}

/** Sends a finished delivery again; the outcome or the API's refusal, for the page to show. */
const useRetry = (afterwards: () => Promise<void>) => {
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

/** The delivery log of a webhook: every delivery with its attempts; one can be sent again. `refresh` changes when the page's actions queue one. */
export const DeliveryLog = (props: { readonly webhook: Webhook; readonly refresh: number }) => {
  const [status, setStatus] = useState("")
  const [place, setPlace] = useState<PagePlace>(FIRST_PAGE)
  const query = { ...pageQuery(place), limit: PAGE_SIZE, status }
  const deliveries = useResource(
    () => call<Deliveries>("GET", `/api/webhooks/${props.webhook.id}/deliveries`, { query }),
    `${props.webhook.id} ${JSON.stringify(query)}`
  )
  const { entries } = useLiveFeed()
  const newest = entries[0]

  // A new event for the webhook's instance may have queued a delivery, and the page's own actions (test, recover) have: show them.
  useEffect(() => {
    if (newest?.kind === "event" && newest.event.instanceId === props.webhook.instance_id) void deliveries.reload()
  }, [newest])
  useEffect(() => {
    if (props.refresh > 0) void deliveries.reload()
  }, [props.refresh])

  // Queued deliveries change on their own (attempts, retries): look again until none is.
  const queued = deliveries.loaded.state === "ready" && deliveries.loaded.value.data.some(isQueued)
  usePolling(queued, deliveries.reload, POLL_MS, deliveries.loaded)

  const { error, outcome, retry } = useRetry(deliveries.reload)

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
              setPlace(FIRST_PAGE)
            }}
          >
            <option value="">Any</option>
            {deliveryStatuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="actions-row">
          <Link to={pathWith("/deliveries", { webhook_id: props.webhook.id })}>Search with more filters</Link>
          <button type="button" class="secondary" onClick={() => void deliveries.reload()}>Refresh</button>
        </div>
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Not sent again:" />
      <Resource loaded={deliveries.loaded} what="the deliveries">
        {(list) => (
          <>
            <DeliveryTable
              caption={`Deliveries to ${props.webhook.name}`}
              deliveries={list.data}
              toActive={() => props.webhook.active}
              onRetry={(delivery) => void retry(delivery)}
              empty={`No deliveries${status === "" ? " yet" : ` with status ${status}`}${
                place.position > 1 ? " on this page" : ""
              }.`}
            />
            <Pager place={place} list={list} noun={["delivery", "deliveries"]} onPage={setPlace} />
          </>
        )}
      </Resource>
    </div>
  )
}

/** Every filter of GET /api/deliveries, as the page's query (so a search can be linked and goes back and forth). */
const FILTERS = ["status", "webhook_id", "instance_id", "since", "until"] as const
type Filter = (typeof FILTERS)[number]
type Filters = Readonly<Record<Filter, string>>

const filtersOf = (query: URLSearchParams): Filters => ({
  status: query.get("status") ?? "",
  webhook_id: query.get("webhook_id") ?? "",
  instance_id: query.get("instance_id") ?? "",
  since: query.get("since") ?? "",
  until: query.get("until") ?? ""
})

const limitOf = (query: URLSearchParams) => {
  const n = Number(query.get("limit"))
  return LIMITS.includes(n) ? n : PAGE_SIZE
}

const SearchForm = (props: {
  readonly filters: Filters
  readonly limit: number
  readonly webhooks: ReadonlyArray<Webhook>
  readonly instances: ReadonlyArray<Instance> | undefined
}) => {
  // Times are edited in local time and kept in the query as ISO 8601 instants.
  const draftOf = (filters: Filters): Filters => ({
    ...filters,
    since: localInputOf(filters.since),
    until: localInputOf(filters.until)
  })
  const [draft, setDraft] = useState<Filters>(() => draftOf(props.filters))
  const [limit, setLimit] = useState(props.limit)
  useEffect(() => setDraft(draftOf(props.filters)), [JSON.stringify(props.filters)])
  useEffect(() => setLimit(props.limit), [props.limit])
  const set = (filter: Filter) => (event: { readonly currentTarget: { readonly value: string } }) =>
    setDraft({ ...draft, [filter]: event.currentTarget.value })
  const active = FILTERS.filter((f) => props.filters[f] !== "").length
  const [narrow] = useState(() => window.matchMedia("(max-width: 720px)").matches)
  const apply = (event: Event) => {
    event.preventDefault()
    navigate(pathWith("/deliveries", {
      ...draft,
      since: isoOfLocalInput(draft.since),
      until: isoOfLocalInput(draft.until),
      limit: limit === PAGE_SIZE ? undefined : limit
    }))
  }
  return (
    <details class="card filters-box" open={!narrow}>
      <summary>Filters{active === 0 ? "" : ` (${active} in use)`}</summary>
      <form class="filters" onSubmit={apply} aria-label="Filter the deliveries">
        <div class="field">
          <label for="d-status">Status</label>
          <select id="d-status" value={draft.status} onChange={set("status")}>
            <option value="">Any</option>
            {deliveryStatuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="field">
          <label for="d-webhook">Webhook</label>
          <select id="d-webhook" value={draft.webhook_id} onChange={set("webhook_id")}>
            <option value="">All webhooks</option>
            {props.webhooks.map((w) => <option key={w.id} value={w.id}>{w.name}</option>)}
          </select>
        </div>
        {props.instances === undefined ? null : (
          <div class="field">
            <label for="d-instance">Instance</label>
            <select id="d-instance" value={draft.instance_id} onChange={set("instance_id")}>
              <option value="">All instances</option>
              {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
        <div class="field">
          <label for="d-since">Created from</label>
          <input
            id="d-since"
            type="datetime-local"
            value={draft.since}
            onInput={set("since")}
            aria-describedby="d-zone"
          />
        </div>
        <div class="field">
          <label for="d-until">Created before</label>
          <input
            id="d-until"
            type="datetime-local"
            value={draft.until}
            onInput={set("until")}
            aria-describedby="d-zone"
          />
        </div>
        <div class="field">
          <label for="d-limit">Per page</label>
          <select id="d-limit" value={String(limit)} onChange={(e) => setLimit(Number(e.currentTarget.value))}>
            {LIMITS.map((n) => <option key={n} value={String(n)}>{n}</option>)}
          </select>
        </div>
        <p id="d-zone" class="help wide">Times are in your time zone ({localZone()}).</p>
        <div class="filter-actions">
          <button type="submit">Apply filters</button>
          <button type="button" class="secondary" onClick={() => navigate("/deliveries")}>Reset</button>
        </div>
      </form>
    </details>
  )
}

/** GET /api/deliveries: the deliveries of every webhook the token sees, filtered, newest first. */
export const DeliverySearchPage = (props: { readonly kind: TokenKind }) => {
  const location = useLocation()
  const filters = filtersOf(location.query)
  const limit = limitOf(location.query)
  const place = placeOf(location.query)
  const query = { ...filters, ...pageQuery(place), limit }
  const deliveries = useResource(() => call<Deliveries>("GET", "/api/deliveries", { query }), JSON.stringify(query))
  const webhooks = useResource(
    () => call<{ readonly data: ReadonlyArray<Webhook> }>("GET", "/api/webhooks"),
    "webhooks"
  )
  const instances = useInstances(props.kind)
  const known = webhooks.loaded.state === "ready" ? webhooks.loaded.value.data : []
  const byId: ReadonlyMap<string, Webhook> = new Map(known.map((w) => [w.id, w]))
  const { entries } = useLiveFeed()
  const newest = entries[0]

  // New events queue deliveries at the top: the first page shows them as they come.
  useEffect(() => {
    if (newest?.kind === "event" && place.position === 1) void deliveries.reload()
  }, [newest])
  const queued = deliveries.loaded.state === "ready" && deliveries.loaded.value.data.some(isQueued)
  usePolling(queued, deliveries.reload, POLL_MS, deliveries.loaded)

  const { error, outcome, retry } = useRetry(deliveries.reload)
  const goTo = (next: PagePlace) =>
    navigate(
      pathWith("/deliveries", { ...filters, limit: limit === PAGE_SIZE ? undefined : limit, ...placeParams(next) })
    )

  return (
    <main id="main">
      <PageTitle lead="Deliveries to every webhook you can see, newest first, with every attempt.">
        Deliveries
      </PageTitle>
      <SearchForm
        filters={filters}
        limit={limit}
        webhooks={known}
        instances={props.kind === "organization" && instances.loaded.state === "ready"
          ? instances.loaded.value.data
          : undefined}
      />
      <div class="toolbar">
        <button type="button" class="secondary" onClick={() => void deliveries.reload()}>Refresh</button>
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Not sent again:" />
      <Resource loaded={deliveries.loaded} what="the deliveries">
        {(list) => (
          <>
            <DeliveryTable
              caption="Deliveries found"
              deliveries={list.data}
              webhooks={byId}
              toActive={(delivery) => byId.get(delivery.webhook_id)?.active === true}
              onRetry={(delivery) => void retry(delivery)}
              empty={place.position > 1 ? "No deliveries on this page." : "No deliveries match."}
            />
            <Pager place={place} list={list} noun={["delivery", "deliveries"]} onPage={goTo} />
          </>
        )}
      </Resource>
    </main>
  )
}

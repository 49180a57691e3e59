/**
 * The organization-wide delivery search (GET /api/deliveries): the deliveries of every webhook the
 * token sees, filtered, newest first with every attempt, paged by the answers' cursors; a finished
 * delivery can be sent again.
 */
import { useEffect, useState } from "preact/hooks"
import { deliveryStatuses } from "../../../Domain/Vocabulary.js"
import { call, pathWith } from "../api.js"
import {
  ErrorNote,
  isoOfLocalInput,
  localInputOf,
  localZone,
  Outcome,
  Pager,
  PageTitle,
  Resource,
  usePolling,
  useResource
} from "../components.js"
import { useInstanceChoices } from "../instances.js"
import { useLiveFeed } from "../live.js"
import { type PagePlace, pageQuery, placeOf, placeParams } from "../paging.js"
import { navigate, useLocation } from "../router.js"
import type { Deliveries, Instance, TokenKind, Webhook } from "../types.js"
import { DELIVERY_PAGE_SIZE, DELIVERY_POLL_MS, DeliveryTable, isQueued, useRetry } from "./DeliveryTable.js"

const LIMITS = [10, 20, 50, 100]

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
  return LIMITS.includes(n) ? n : DELIVERY_PAGE_SIZE
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
      limit: limit === DELIVERY_PAGE_SIZE ? undefined : limit
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
  const instances = useInstanceChoices(props.kind)
  const known = webhooks.loaded.state === "ready" ? webhooks.loaded.value.data : []
  const byId: ReadonlyMap<string, Webhook> = new Map(known.map((w) => [w.id, w]))
  const { entries } = useLiveFeed()
  const newest = entries[0]

  // New events queue deliveries at the top: the first page shows them as they come.
  useEffect(() => {
    if (newest?.kind === "event" && place.position === 1) void deliveries.reload()
  }, [newest])
  const queued = deliveries.loaded.state === "ready" && deliveries.loaded.value.data.some(isQueued)
  usePolling(queued, deliveries.reload, DELIVERY_POLL_MS, deliveries.loaded)

  const { error, outcome, retry } = useRetry(deliveries.reload)
  const goTo = (next: PagePlace) =>
    navigate(
      pathWith("/deliveries", {
        ...filters,
        limit: limit === DELIVERY_PAGE_SIZE ? undefined : limit,
        ...placeParams(next)
      })
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
        instances={instances}
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

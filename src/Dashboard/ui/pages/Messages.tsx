import { useEffect, useState } from "preact/hooks"
import { messageStatuses } from "../../../Domain/Vocabulary.js"
import { call, pathWith } from "../api.js"
import { Badge, Pager, PageTitle, Resource, Time, type Tone, useResource } from "../components.js"
import { useInstanceChoices } from "../instances.js"
import { type PagePlace, pageQuery, placeOf, placeParams } from "../paging.js"
import { Link, navigate, useLocation } from "../router.js"
import type { Instance, Message, Messages, TokenKind } from "../types.js"
import { Timeline } from "./MessageTimeline.js"

/** Every filter of GET /api/messages, as the page's query (so a filtered view can be linked and goes back and forth). */
const FILTERS = ["status", "direction", "startDate", "endDate", "waMessageId", "user", "instance_id"] as const
type Filter = (typeof FILTERS)[number]
type Filters = Readonly<Record<Filter, string>>

const LIMITS = [10, 25, 50, 100]

const statusTone = (status: string): Tone =>
  status === "read" || status === "delivered"
    ? "ok"
    : status === "failed"
    ? "bad"
    : status === "sent"
    ? "info"
    : "neutral"

const filtersOf = (query: URLSearchParams): Filters => ({
  status: query.get("status") ?? "",
  direction: query.get("direction") ?? "",
  startDate: query.get("startDate") ?? "",
  endDate: query.get("endDate") ?? "",
  waMessageId: query.get("waMessageId") ?? "",
  user: query.get("user") ?? "",
  instance_id: query.get("instance_id") ?? ""
})

/** Where a record came from when not a send of the hub's, in words. */
const ORIGINS: Readonly<Record<string, string>> = {
  smb_message_echoes: "from the Business app",
  message_echoes: "sent by another sender",
  standby: "while Meta's agent held the chat",
  history: "synchronised history"
}

/**
 * The other party: their username when known, then their number or, for a username user whose number
 * is not known, their business-scoped user id; a link to every message with them.
 */
const Customer = (props: { readonly message: Message }) => {
  const { message } = props
  return (
    <span class="customer">
      {message.username === undefined ? null : <span class="username">@{message.username}{" "}</span>}
      <Link to={pathWith("/messages", { user: message.to })} class="mono">
        <span class="visually-hidden">Every message with{" "}</span>
        {message.to}
      </Link>
      {message.userId !== undefined && message.userId !== message.to
        ? <span class="mono muted small">{" "}{message.userId}</span>
        : null}
    </span>
  )
}

const wholeNumber = (text: string | null, fallback: number) => {
  const n = Number(text)
  return Number.isInteger(n) && n > 0 ? n : fallback
}

const FilterForm = (
  props: { readonly filters: Filters; readonly limit: number; readonly instances: ReadonlyArray<Instance> | undefined }
) => {
  const [draft, setDraft] = useState<Filters>(props.filters)
  const [limit, setLimit] = useState(props.limit)
  useEffect(() => setDraft(props.filters), [JSON.stringify(props.filters)])
  useEffect(() => setLimit(props.limit), [props.limit])
  const set = (filter: Filter) => (event: { readonly currentTarget: { readonly value: string } }) =>
    setDraft({ ...draft, [filter]: event.currentTarget.value })
  const active = FILTERS.filter((f) => props.filters[f] !== "").length
  // On a phone the filters start folded, so the history is what shows first.
  const [narrow] = useState(() => window.matchMedia("(max-width: 720px)").matches)
  const apply = (event: Event) => {
    event.preventDefault()
    navigate(pathWith("/messages", { ...draft, limit: limit === 50 ? undefined : limit }))
  }
  return (
    <details class="card filters-box" open={!narrow}>
      <summary>Filters{active === 0 ? "" : ` (${active} in use)`}</summary>
      <form class="filters" onSubmit={apply} aria-label="Filter the history">
        <div class="field">
          <label for="f-status">Status</label>
          <select id="f-status" value={draft.status} onChange={set("status")}>
            <option value="">Any</option>
            {messageStatuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div class="field">
          <label for="f-direction">Direction</label>
          <select id="f-direction" value={draft.direction} onChange={set("direction")}>
            <option value="">Both</option>
            <option value="inbound">Inbound</option>
            <option value="outbound">Outbound</option>
          </select>
        </div>
        <div class="field">
          <label for="f-start">From</label>
          <input id="f-start" type="date" value={draft.startDate} onInput={set("startDate")} />
        </div>
        <div class="field">
          <label for="f-end">Until (inclusive)</label>
          <input id="f-end" type="date" value={draft.endDate} onInput={set("endDate")} />
        </div>
        <div class="field wide">
          <label for="f-wamid">Upstream message id</label>
          <input
            id="f-wamid"
            class="mono"
            placeholder="wamid.…"
            value={draft.waMessageId}
            onInput={set("waMessageId")}
          />
        </div>
        <div class="field wide">
          <label for="f-user">Person</label>
          <input
            id="f-user"
            class="mono"
            placeholder="16505551234 or US.1349…"
            aria-describedby="f-user-help"
            value={draft.user}
            onInput={set("user")}
          />
          <span id="f-user-help" class="help">
            A number or business-scoped user id: every message with that person, under any id the hub has learned for
            them.
          </span>
        </div>
        {props.instances === undefined ? null : (
          <div class="field">
            <label for="f-instance">Instance</label>
            <select id="f-instance" value={draft.instance_id} onChange={set("instance_id")}>
              <option value="">All instances</option>
              {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
        <div class="field">
          <label for="f-limit">Per page</label>
          <select id="f-limit" value={String(limit)} onChange={(e) => setLimit(Number(e.currentTarget.value))}>
            {LIMITS.map((n) => <option key={n} value={String(n)}>{n}</option>)}
          </select>
        </div>
        <div class="filter-actions">
          <button type="submit">Apply filters</button>
          <button type="button" class="secondary" onClick={() => navigate("/messages")}>Reset</button>
        </div>
      </form>
    </details>
  )
}

/** One message's row; its button opens (or closes) its status timeline. */
const MessageRow = (
  props: { readonly message: Message; readonly selected: boolean; readonly onTimeline: () => void }
) => {
  const { message } = props
  return (
    <tr class={props.selected ? "selected" : undefined}>
      <td data-label="Created">
        <Time iso={message.createdAt} />
      </td>
      <td data-label="Direction">{message.direction === "inbound" ? "← inbound" : "→ outbound"}</td>
      <td data-label="Customer">
        <Customer message={message} />
      </td>
      <td data-label="Type">
        {message.type}
        {message.origin === undefined
          ? null
          : <span class="muted small">{" "}· {ORIGINS[message.origin] ?? message.origin}</span>}
      </td>
      <td data-label="Status">
        <Badge tone={statusTone(message.status)}>{message.status}</Badge>
      </td>
      <td data-label="Upstream id" class="mono truncate" title={message.waMessageId ?? undefined}>
        {message.waMessageId ?? "—"}
      </td>
      <td data-label="Timeline" class="actions">
        <button
          type="button"
          class="secondary"
          aria-pressed={props.selected}
          aria-label={`Timeline of ${message.waMessageId ?? message.id}`}
          onClick={props.onTimeline}
        >
          Timeline
        </button>
      </td>
    </tr>
  )
}

const MessageTable = (props: {
  readonly messages: ReadonlyArray<Message>
  readonly selected: Message | undefined
  readonly onSelect: (message: Message | undefined) => void
  /** Which page this is (beyond the first, an empty page says so). */
  readonly place: PagePlace
}) => (
  <div class="table-wrap">
    <table class="responsive">
      <caption class="visually-hidden">Message history</caption>
      <thead>
        <tr>
          <th scope="col">Created</th>
          <th scope="col">Direction</th>
          <th scope="col">Customer</th>
          <th scope="col">Type</th>
          <th scope="col">Status</th>
          <th scope="col">Upstream id</th>
          <th scope="col">
            <span class="visually-hidden">Timeline</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {props.messages.map((message) => {
          const selected = props.selected?.id === message.id
          return (
            <MessageRow
              key={message.id}
              message={message}
              selected={selected}
              onTimeline={() => props.onSelect(selected ? undefined : message)}
            />
          )
        })}
      </tbody>
    </table>
    {props.messages.length === 0
      ? <p class="muted">{props.place.position > 1 ? "No messages on this page." : "No messages match."}</p>
      : null}
  </div>
)

export const MessagesPage = (props: { readonly kind: TokenKind }) => {
  const location = useLocation()
  const filters = filtersOf(location.query)
  const place = placeOf(location.query)
  const limit = wholeNumber(location.query.get("limit"), 50)
  const query = { ...filters, ...pageQuery(place), limit }
  const messages = useResource(() => call<Messages>("GET", "/api/messages", { query }), JSON.stringify(query))
  const instances = useInstanceChoices(props.kind)
  const [selected, setSelected] = useState<Message | undefined>(undefined)
  const goTo = (next: PagePlace) =>
    navigate(pathWith("/messages", { ...filters, limit: limit === 50 ? undefined : limit, ...placeParams(next) }))
  return (
    <main id="main">
      <PageTitle lead="Every message sent and received, newest first.">Messages</PageTitle>
      <FilterForm
        filters={filters}
        limit={limit}
        instances={instances}
      />
      <div class="toolbar">
        <button type="button" class="secondary" onClick={() => void messages.reload()}>Refresh</button>
      </div>
      {selected === undefined ? null : <Timeline message={selected} onClose={() => setSelected(undefined)} />}
      <div>
        <Resource loaded={messages.loaded} what="the messages">
          {(list) => (
            <div>
              <MessageTable messages={list.data} selected={selected} onSelect={setSelected} place={place} />
              <Pager place={place} list={list} noun={["message", "messages"]} onPage={goTo} />
            </div>
          )}
        </Resource>
      </div>
    </main>
  )
}

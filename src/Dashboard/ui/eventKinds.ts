/**
 * The kinds of change a webhook may take, from the hub's own list (src/Domain/EventKinds.ts),
 * bundled as it is: a pure module whose only import is a type, so the dashboard offers exactly the
 * kinds the API accepts and no server code comes along (src/Dashboard/build.ts refuses any other
 * server module in the bundle). The OpenAPI document does not enumerate the kinds, so fetching them
 * is no option; hard-coding them would drift.
 */
import { ALL_KINDS, CHANGE_FIELDS, EVENT_KINDS, QUEUE_EVENT_KIND } from "../../Domain/EventKinds.js"

export { ALL_KINDS }

const changeFields: ReadonlySet<string> = new Set([...CHANGE_FIELDS, QUEUE_EVENT_KIND])

/** The kinds that split the upstream's `messages` field: every kind that is not a change field of its own. */
export const MESSAGE_KINDS: ReadonlyArray<string> = EVENT_KINDS.filter((kind) => !changeFields.has(kind))

/** Every other kind: an upstream change field, delivered under its own name, and the hub's own queue outcomes. */
export const FIELD_KINDS: ReadonlyArray<string> = [...CHANGE_FIELDS, QUEUE_EVENT_KIND]

/** The fields the sandbox simulates (POST /sandbox/changes): `messages` and every other change field. */
export const SIMULATED_FIELDS: ReadonlyArray<string> = ["messages", ...CHANGE_FIELDS]

/** The API documentation's words for the kinds that split `messages` (the `events` field of POST /api/webhooks). */
const DOCUMENTED: Readonly<Record<string, string>> = {
  messages: "Inbound messages",
  statuses: "Status updates of sent messages",
  errors: "Changes carrying only errors",
  [QUEUE_EVENT_KIND]: "Queued sends made or given up (the hub's own events, delivered only when named)"
}

export const kindDescription = (kind: string) => DOCUMENTED[kind] ?? `The upstream's ${kind} changes`

export const takesEveryKind = (events: ReadonlyArray<string>) => events.length === 0 || events.includes(ALL_KINDS)

/** The kinds in the hub's order (the order the form lists them). */
export const inKindOrder = (kinds: ReadonlySet<string>): ReadonlyArray<string> =>
  EVENT_KINDS.filter((kind) => kinds.has(kind))

/** A webhook's kinds in the hub's order (the API answers them sorted by name); a kind not known here last. */
const ordered = (events: ReadonlyArray<string>) => {
  const taken = new Set(events)
  return [...inKindOrder(taken), ...events.filter((kind) => !EVENT_KINDS.includes(kind))]
}

/** What a webhook receives, in a few words: "All kinds", or its kinds ("messages, statuses and 3 more"). */
export const eventsSummary = (events: ReadonlyArray<string>, shown = 3) => {
  if (takesEveryKind(events)) return "All kinds"
  const kinds = ordered(events)
  if (kinds.length <= shown) return kinds.join(", ")
  return `${kinds.slice(0, shown - 1).join(", ")} and ${kinds.length - shown + 1} more`
}

/**
 * The kinds of change a webhook may subscribe to (`events` on create and PATCH), in one place.
 *
 * A change of the upstream's `messages` field is split by what it carries: `messages` (inbound
 * messages: `value.messages`), `statuses` (status updates of sent messages: `value.statuses`) and
 * `errors` (a change carrying only `value.errors`, no messages or statuses). A change carrying both
 * messages and statuses is of both kinds; a `messages` change carrying none of the three counts as
 * `messages`. Every other change is of the kind named by its `field`, exactly as the upstream writes
 * it (Meta's webhook fields of a WhatsApp Business Account). A webhook may also name a field not
 * listed here (one Meta adds later), in the upstream's form (FIELD_NAME): a change of that field
 * reaches it, and the webhooks that take every kind.
 */
import type { JsonObject } from "./Json.js"

/** The kinds that split the upstream's `messages` field. */
const MESSAGE_KINDS = ["messages", "statuses", "errors"] as const

/** Upstream change fields delivered under their own name (Meta's WhatsApp Business Account webhook fields). */
export const CHANGE_FIELDS = [
  "account_alerts",
  "account_review_update",
  "account_settings_update",
  "account_update",
  "automatic_events",
  "business_capability_update",
  "business_status_update",
  "calls",
  "flows",
  "group_lifecycle_update",
  // Meta's examples and field list write `group_participants_update`; its schema's enum writes the singular.
  "group_participant_update",
  "group_participants_update",
  "group_settings_update",
  "group_status_update",
  "history",
  "message_echoes",
  "message_template_components_update",
  "message_template_quality_update",
  "message_template_status_update",
  "messaging_handovers",
  "partner_solutions",
  "payment_configuration_update",
  "phone_number_name_update",
  "phone_number_quality_update",
  "security",
  "smb_app_state_sync",
  "smb_message_echoes",
  // Meta Business Agent: the user's messages and the agent's replies while the agent holds the conversation.
  "standby",
  "template_category_update",
  "template_correct_category_detection",
  "tracking_events",
  "user_preferences"
] as const

/**
 * The hub's own kind: a queued send made or given up (SendQueue/QueueEvents.ts). Delivered only to
 * webhooks that name it, never to those that take every kind (their receivers expect Meta's payloads).
 */
export const QUEUE_EVENT_KIND = "hub.message_queue"

/** The hub's test events' kind (Webhooks/TestEvents.ts): each is its webhook's own, never sent to another nor replayed. */
export const TEST_EVENT_KIND = "hub.test"

/** Every kind a webhook may name, besides `*` (all of them). */
export const EVENT_KINDS: ReadonlyArray<string> = [...MESSAGE_KINDS, ...CHANGE_FIELDS, QUEUE_EVENT_KIND]

export type EventKind = string

/** A webhook field's name as the upstream writes them: lower case, digits and underscores, at most 64 characters. */
const FIELD_NAME = /^[a-z][a-z0-9_]{0,63}$/

/** Whether a webhook may name this kind: a known one, or any field name of the upstream's form. */
export const isEventKind = (name: string): boolean => FIELD_NAME.test(name) || name === QUEUE_EVENT_KIND

/** `["*"]` (or nothing) means every kind: such a webhook is stored without a filter. */
export const ALL_KINDS = "*"

/** The kinds of one change, from its `field` and `value` (see the module comment). */
export const kindsOf = (field: string | undefined, value: JsonObject): ReadonlyArray<EventKind> => {
  if (field === "messages") {
    const messages = Array.isArray(value.messages)
    const statuses = Array.isArray(value.statuses)
    if (messages && statuses) return ["messages", "statuses"]
    if (statuses) return ["statuses"]
    if (!messages && value.errors !== undefined) return ["errors"]
    return ["messages"]
  }
  return field !== undefined && isEventKind(field) ? [field] : []
}

/**
 * Which of an event's changes a filtered webhook takes (by index), given each change's kinds:
 * "all" when every change matches, "none" when none does, else the matching indices in order.
 */
export const selectChanges = (
  subscribed: ReadonlySet<EventKind>,
  changeKinds: ReadonlyArray<ReadonlyArray<EventKind>>
): "all" | "none" | ReadonlyArray<number> => {
  const taken: Array<number> = []
  changeKinds.forEach((kinds, index) => {
    if (kinds.some((kind) => subscribed.has(kind))) taken.push(index)
  })
  return taken.length === changeKinds.length ? "all" : taken.length === 0 ? "none" : taken
}

/** How a filter is stored: NULL for every kind, else the kinds as a JSON array, sorted. */
export const storedFilter = (events: ReadonlyArray<string> | undefined): string | null =>
  events === undefined || events.includes(ALL_KINDS) ? null : JSON.stringify([...new Set(events)].sort())

/** A stored filter read back: undefined for every kind. */
export const parseFilter = (stored: string | null): ReadonlyArray<EventKind> | undefined => {
  if (stored === null) return undefined
  const parsed: unknown = JSON.parse(stored)
  return Array.isArray(parsed) ? parsed.filter((k): k is string => typeof k === "string") : undefined
}

/**
 * The person a change concerns, for webhooks that take one person's deliveries in order
 * (`ordering: per_contact`): the user behind each item of a change's lists, named by BSUID when the
 * upstream gives one (always, since 2026), else by number (see research/platform-2026.md §1), and an
 * event split into one part per person so each part can wait in its person's lane.
 *
 * Which field names the user, per list: `messages[]` from_user_id / from; `statuses[]`
 * recipient_user_id / recipient_id; `message_echoes[]` to_user_id / to; `user_preferences[]` user_id /
 * wa_id; `calls[]` the caller for a call the user placed, the callee for one the business placed.
 * A `standby` change carries its lists one level down. Changes with none of these (account,
 * template, group changes, errors) concern no person and are never held.
 */
import { isJsonObject, type Json, type JsonObject } from "../Domain/Json.js"
import type { UpstreamChange } from "./Envelope.js"

const text = (value: Json | undefined): string | undefined =>
  typeof value === "string" && value !== "" ? value : undefined

/** The user a call concerns: the caller of a call the user placed, the callee of one the business placed. */
const callee = (call: JsonObject) =>
  call.direction === "BUSINESS_INITIATED"
    ? text(call.to_user_id) ?? text(call.to)
    : text(call.from_user_id) ?? text(call.from)

/** Per list, how to read the user an item concerns. */
const USER_OF: ReadonlyArray<readonly [list: string, user: (item: JsonObject) => string | undefined]> = [
  ["messages", (m) => text(m.from_user_id) ?? text(m.from)],
  ["statuses", (s) => text(s.recipient_user_id) ?? text(s.recipient_id)],
  ["message_echoes", (e) => text(e.to_user_id) ?? text(e.to)],
  ["user_preferences", (p) => text(p.user_id) ?? text(p.wa_id)],
  ["calls", callee]
]

/** The value holding the lists: a `standby` change's nested one, else the change's own. */
const listsOf = (value: JsonObject): JsonObject => (isJsonObject(value.standby) ? value.standby : value)

/** The persons a change's value concerns, in the order first named. */
const personsOf = (value: JsonObject): ReadonlyArray<string> => {
  const lists = listsOf(value)
  const persons = new Set<string>()
  for (const [list, user] of USER_OF) {
    const items = lists[list]
    if (!Array.isArray(items)) continue
    for (const item of items) {
      const person = isJsonObject(item) ? user(item) : undefined
      if (person !== undefined) persons.add(person)
    }
  }
  return [...persons]
}

/** A copy of `o` with `key` set to `value`, in the key's own place. */
const withKey = (o: JsonObject, key: string, value: Json): JsonObject => {
  const copy: Record<string, Json> = {}
  for (const k of Object.keys(o)) copy[k] = k === key ? value : o[k] ?? null
  return copy
}

/** Whether a `contacts[]` entry names this person. */
const namesPerson = (contact: Json, person: string) =>
  isJsonObject(contact) && (contact.user_id === person || contact.wa_id === person)

/**
 * The part of a change's value about one person: each list keeps only that person's items, and
 * `contacts[]` only the entries naming them (all of them if none does, a profile the upstream gave
 * without ids). Every other field is kept as received.
 */
const valueFor = (value: JsonObject, person: string): JsonObject => {
  const lists = listsOf(value)
  let part = lists
  for (const [list, user] of USER_OF) {
    const items = lists[list]
    if (Array.isArray(items)) part = withKey(part, list, items.filter((i) => isJsonObject(i) && user(i) === person))
  }
  const contacts = lists.contacts
  if (Array.isArray(contacts) && contacts.some((c) => namesPerson(c, person))) {
    part = withKey(part, "contacts", contacts.filter((c) => namesPerson(c, person)))
  }
  return lists === value ? part : withKey(value, "standby", part)
}

/** One person's changes of an event (or, with `person` null, the changes that concern no one), in order. */
export interface ContactPart {
  readonly person: string | null
  readonly changes: ReadonlyArray<UpstreamChange>
}

/**
 * An event's changes grouped by person, in the order each person first appears. A change naming
 * one person (nearly all: Meta sends one message or status per change) goes whole to that person's
 * part; one naming several is split, each part holding that person's items.
 */
export const splitByContact = (changes: ReadonlyArray<UpstreamChange>): ReadonlyArray<ContactPart> => {
  const parts = new Map<string | null, Array<UpstreamChange>>()
  const add = (person: string | null, change: UpstreamChange) => {
    const list = parts.get(person) ?? []
    list.push(change)
    parts.set(person, list)
  }
  for (const change of changes) {
    const persons = personsOf(change.value)
    if (persons.length === 0) add(null, change)
    else if (persons.length === 1) add(persons[0] ?? null, change)
    else {
      for (const person of persons) {
        const value = valueFor(change.value, person)
        add(person, { ...change, value, change: withKey(change.change, "value", value) })
      }
    }
  }
  return [...parts].map(([person, list]) => ({ person, changes: list }))
}

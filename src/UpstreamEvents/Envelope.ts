/**
 * The upstream webhook envelope `{object, entry: [{id, changes: [{field, value}]}]}`: light validation,
 * the identity of a change (what makes a redelivered change a duplicate), and the envelope an
 * instance receives: the upstream's own, every field kept, holding only that instance's changes.
 */
import { Either } from "effect"
import { createHash } from "node:crypto"
import type { FieldIssue } from "../Domain/Errors.js"
import type { Json, JsonObject } from "../Domain/Json.js"
import { isJsonObject } from "../Domain/Json.js"

export interface UpstreamChange {
  /** `entry[].id`: the business account (WABA) id. */
  readonly entryId: string | undefined
  /** The entry as received, and the whole payload: their other fields (`time`, …) are delivered as they came. */
  readonly entry: JsonObject
  readonly payload: JsonObject
  readonly field: string | undefined
  /** The change exactly as received (`{field, value}` and anything else it carries). */
  readonly change: JsonObject
  readonly value: JsonObject
  readonly phoneNumberId: string | undefined
}

export interface Envelope {
  readonly object: string
  readonly changes: ReadonlyArray<UpstreamChange>
}

const stringAt = (o: JsonObject, key: string): string | undefined => {
  const v = o[key]
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : undefined
}

/**
 * How deep an upstream post may nest. Meta's are about 8 levels deep; the hub's recursive steps (the
 * dedupe key's canonical form, the envelopes' text) would overflow the stack on a post nested
 * thousands deep, failing the group it is written with, so such a post is refused alone, with a 400.
 */
const MAX_PAYLOAD_DEPTH = 64

/** Whether a value nests deeper than `limit` (walked without recursion, so any depth is measured safely). */
const nestsDeeperThan = (value: Json, limit: number): boolean => {
  const stack: Array<readonly [Json, number]> = [[value, 1]]
  for (let next = stack.pop(); next !== undefined; next = stack.pop()) {
    const [at, depth] = next
    if (typeof at !== "object" || at === null) continue
    if (depth > limit) return true
    for (const child of Array.isArray(at) ? at : Object.values(at)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1])
    }
  }
  return false
}

/** Checks the envelope's shape (every entry and every change), naming each part that is wrong. */
export const parseEnvelope = (payload: Json): Either.Either<Envelope, ReadonlyArray<FieldIssue>> => {
  if (!isJsonObject(payload)) return Either.left([{ field: "body", message: "must be a JSON object" }])
  if (nestsDeeperThan(payload, MAX_PAYLOAD_DEPTH)) {
    return Either.left([{ field: "body", message: `must not nest deeper than ${MAX_PAYLOAD_DEPTH} levels` }])
  }
  const issues: Array<FieldIssue> = []
  const object = payload.object
  if (object !== undefined && typeof object !== "string") issues.push({ field: "object", message: "must be a string" })
  const entries = payload.entry
  if (!Array.isArray(entries)) return Either.left([...issues, { field: "entry", message: "must be an array" }])
  const changes: Array<UpstreamChange> = []
  entries.forEach((entry: Json, e) => {
    const list = isJsonObject(entry) ? entry.changes : undefined
    if (!isJsonObject(entry)) issues.push({ field: `entry.${e}`, message: "must be an object" })
    else if (!Array.isArray(list)) issues.push({ field: `entry.${e}.changes`, message: "must be an array" })
    else {
      list.forEach((change: Json, c) => {
        if (!isJsonObject(change) || !isJsonObject(change.value)) {
          issues.push({ field: `entry.${e}.changes.${c}.value`, message: "must be an object" })
          return
        }
        const metadata = change.value.metadata
        changes.push({
          entryId: stringAt(entry, "id"),
          entry,
          payload,
          field: stringAt(change, "field"),
          change,
          value: change.value,
          phoneNumberId: isJsonObject(metadata) ? stringAt(metadata, "phone_number_id") : undefined
        })
      })
    }
  })
  return issues.length > 0
    ? Either.left(issues)
    : Either.right({ object: typeof object === "string" ? object : "whatsapp_business_account", changes })
}

/** JSON with object keys sorted, so equal values always give the same text. */
const canonicalJson = (value: Json): string => {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`
  if (isJsonObject(value)) {
    return `{${
      Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k] ?? null)}`).join(",")
    }}`
  }
  return JSON.stringify(value)
}

/** A Unix time in seconds, as the upstream writes it in `timestamp` (a string of digits). */
const SECONDS = /^\d{1,10}$/

/**
 * In one pass over a change's messages, statuses and calls: what identifies each, and the earliest
 * and latest of their `timestamp`s, zero-padded to sort as text (undefined if none is usable).
 */
const itemsOf = (value: JsonObject) => {
  const identities: Array<string> = []
  let earliest: string | undefined
  let latest: string | undefined
  const of = (key: string, identify: (item: JsonObject) => string | undefined) => {
    const items = value[key]
    if (!Array.isArray(items)) return
    for (const item of items) {
      identities.push((isJsonObject(item) ? identify(item) : undefined) ?? `${key}:${canonicalJson(item)}`)
      const seconds = isJsonObject(item) ? stringAt(item, "timestamp") : undefined
      if (seconds === undefined || !SECONDS.test(seconds)) continue
      const padded = seconds.padStart(10, "0")
      if (earliest === undefined || padded < earliest) earliest = padded
      if (latest === undefined || padded > latest) latest = padded
    }
  }
  const id = (item: JsonObject) => stringAt(item, "id")
  of("messages", (m) => (id(m) === undefined ? undefined : `message:${id(m)}`))
  of(
    "statuses",
    (s) => (id(s) === undefined ? undefined : `status:${id(s)}:${stringAt(s, "status")}:${stringAt(s, "timestamp")}`)
  )
  of(
    "calls",
    (c) => (id(c) === undefined ? undefined : `call:${id(c)}:${stringAt(c, "event")}:${stringAt(c, "timestamp")}`)
  )
  return { identities, earliest, latest }
}

/**
 * Whether every change of a post is older than `horizonMs` by its items' times (messages, statuses,
 * calls): a replay of what the dedupe keys, pruned after that horizon, no longer remember. A change
 * without such a time (an account or template update) is never judged old.
 */
export const isReplayBefore = (changes: ReadonlyArray<UpstreamChange>, horizonMs: number): boolean =>
  changes.length > 0 && changes.every((change) => {
    const { latest } = itemsOf(change.value)
    return latest !== undefined && Number(latest) * 1000 < horizonMs
  })

/**
 * What makes a change the same change when the upstream sends it again, for one instance: the ids
 * inside it (message ids; status id + status + timestamp; call id + event + timestamp), or, for
 * changes without such items (account or template updates), the whole value in canonical form.
 * The key starts with the change's own time (its items' earliest `timestamp`, which a resent change
 * carries unchanged), then 132 bits of the identity's SHA-256. Keys of new changes thus land at the
 * end of the dedupe index, on the same few pages; purely random keys put each one on a page of its
 * own, which cost about 36 µs a change and as many page writes per commit.
 */
export const dedupeKey = (instanceId: string, change: UpstreamChange): string => {
  const { identities, earliest } = itemsOf(change.value)
  const identity = identities.length > 0 ? identities.sort().join("|") : `value:${canonicalJson(change.value)}`
  const digest = createHash("sha256").update(`${instanceId}\n${change.field ?? ""}\n${identity}`).digest("base64url")
  return `${earliest ?? "0000000000"}.${digest.slice(0, 22)}`
}

/** A copy of `o` with `key` set to `value`, in the key's own place (so key order stays as received). */
const replacing = (o: JsonObject, key: string, value: Json): JsonObject => {
  const copy: Record<string, Json> = {}
  for (const k of Object.keys(o)) copy[k] = k === key ? value : o[k] ?? null
  if (!(key in copy)) copy[key] = value
  return copy
}

/**
 * The envelope for one instance: the upstream's payload (changes of one payload) with every field it
 * and its entries carry, keeping only the entries holding the instance's changes and only those
 * changes, in the order received; `object` is added if the upstream left it out.
 */
export const envelopeFor = (object: string, changes: ReadonlyArray<UpstreamChange>): string => {
  const entries = new Map<JsonObject, Array<JsonObject>>()
  for (const change of changes) {
    const list = entries.get(change.entry) ?? []
    list.push(change.change)
    entries.set(change.entry, list)
  }
  const envelope = replacing(
    changes[0]?.payload ?? {},
    "entry",
    [...entries].map(([entry, list]) => replacing(entry, "changes", list))
  )
  return JSON.stringify(envelope.object === undefined ? { object, ...envelope } : envelope)
}

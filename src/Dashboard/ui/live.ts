/**
 * The live feed: one GET /api/events/stream per signed-in tab (organization and instance tokens),
 * read with fetch because EventSource cannot send an Authorization header, parsed by
 * eventsource-parser. It reconnects after a failure (1 s, doubling to 30 s) except when the hub
 * refuses the token; it keeps the newest 200 arrivals in memory for the live page and the message
 * timelines.
 */
import { createParser } from "eventsource-parser"
import { useEffect, useState } from "preact/hooks"
import type { ApiError } from "./api.js"

interface LiveEvent {
  readonly id: string
  readonly instanceId: string
  readonly receivedAt: string
  readonly payload: unknown
}

export type LiveEntry =
  | { readonly kind: "event"; readonly event: LiveEvent }
  | { readonly kind: "dropped"; readonly count: number; readonly at: string; readonly message: string }

export type Connection =
  | { readonly state: "off" }
  | { readonly state: "connecting" }
  | { readonly state: "open"; readonly since: string }
  | { readonly state: "retrying"; readonly error: ApiError; readonly inSeconds: number }
  | { readonly state: "refused"; readonly error: ApiError }

const KEEP = 200

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

const eventOf = (data: string): LiveEvent | undefined => {
  const parsed = parseJson(data)
  if (
    !isRecord(parsed) || typeof parsed.id !== "string" || typeof parsed.instance_id !== "string" ||
    typeof parsed.received_at !== "string"
  ) {
    return undefined
  }
  return { id: parsed.id, instanceId: parsed.instance_id, receivedAt: parsed.received_at, payload: parsed.payload }
}

const errorOf = async (response: Response): Promise<ApiError> => {
  const body = parseJson(await response.text())
  return isRecord(body) && typeof body.message === "string"
    ? { status: response.status, message: body.message, code: typeof body.error === "string" ? body.error : undefined }
    : { status: response.status, message: `The hub answered ${response.status}`, code: undefined }
}

class LiveFeed {
  entries: ReadonlyArray<LiveEntry> = []
  connection: Connection = { state: "off" }
  private readonly listeners = new Set<() => void>()
  private abort: AbortController | undefined
  private retry: ReturnType<typeof setTimeout> | undefined
  private onUnauthorized: (message: string) => void = () => {}

  listen(listener: () => void) {
    this.listeners.add(listener)
    return () => void this.listeners.delete(listener)
  }

  private changed() {
    for (const listener of this.listeners) listener()
  }

  private setConnection(connection: Connection) {
    this.connection = connection
    this.changed()
  }

  private add(entry: LiveEntry) {
    this.entries = [entry, ...this.entries].slice(0, KEEP)
    this.changed()
  }

  clear() {
    this.entries = []
    this.changed()
  }

  start(token: string, onUnauthorized: (message: string) => void) {
    this.stop()
    this.onUnauthorized = onUnauthorized
    void this.connect(token, 1)
  }

  stop() {
    this.abort?.abort()
    this.abort = undefined
    clearTimeout(this.retry)
    this.entries = []
    this.setConnection({ state: "off" })
  }

  private async connect(token: string, delaySeconds: number) {
    const abort = new AbortController()
    this.abort = abort
    this.setConnection({ state: "connecting" })
    const failed = (error: ApiError) => {
      if (abort.signal.aborted) return
      if (error.status === 401) this.onUnauthorized(error.message)
      if (error.status === 401 || error.status === 403) return this.setConnection({ state: "refused", error })
      this.setConnection({ state: "retrying", error, inSeconds: delaySeconds })
      this.retry = setTimeout(() => void this.connect(token, Math.min(30, delaySeconds * 2)), delaySeconds * 1000)
    }
    try {
      const response = await fetch("/api/events/stream", {
        headers: { authorization: `Bearer ${token}` },
        signal: abort.signal
      })
      if (!response.ok || response.body === null) return failed(await errorOf(response))
      const parser = createParser({
        onEvent: (message) => {
          if (message.event === "ready") {
            delaySeconds = 1
            return this.setConnection({ state: "open", since: new Date().toISOString() })
          }
          const data = parseJson(message.data)
          if (message.event === "dropped" && isRecord(data)) {
            return this.add({
              kind: "dropped",
              count: typeof data.dropped === "number" ? data.dropped : 0,
              at: new Date().toISOString(),
              message: typeof data.message === "string" ? data.message : "Some events were dropped"
            })
          }
          const event = message.event === undefined ? eventOf(message.data) : undefined
          if (event !== undefined) this.add({ kind: "event", event })
        }
      })
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
      for (;;) {
        const chunk = await reader.read()
        if (chunk.done) break
        parser.feed(chunk.value)
      }
      failed({ status: 0, message: "The hub closed the stream", code: undefined })
    } catch (cause) {
      failed({ status: 0, message: `The stream was interrupted: ${String(cause)}`, code: undefined })
    }
  }
}

export const liveFeed = new LiveFeed()

/** The feed's entries and connection, re-rendering on every change. */
export const useLiveFeed = () => {
  const [, setVersion] = useState(0)
  useEffect(() => liveFeed.listen(() => setVersion((v) => v + 1)), [])
  return { entries: liveFeed.entries, connection: liveFeed.connection }
}

// Reading the upstream's envelope (unknown JSON) for people.

const records = (u: unknown): ReadonlyArray<Record<string, unknown>> => (Array.isArray(u) ? u.filter(isRecord) : [])
const text = (record: Record<string, unknown>, key: string): string | undefined => {
  const value = record[key]
  return typeof value === "string" ? value : typeof value === "number" ? String(value) : undefined
}

export interface ChangeLine {
  readonly field: string
  readonly summary: string
}

/** What one upstream message says, briefly. */
const messageLine = (message: Record<string, unknown>) => {
  const type = text(message, "type") ?? "message"
  const from = text(message, "from") ?? "someone"
  const content = message[type]
  const body = isRecord(content)
    ? text(content, "body") ?? text(content, "caption") ?? text(content, "emoji")
    : undefined
  return `Inbound ${type} from ${from}${body === undefined ? "" : `: “${body}”`}`
}

const statusLine = (status: Record<string, unknown>) =>
  `Status ${text(status, "status") ?? "?"} for ${text(status, "id") ?? "a message"}${
    text(status, "recipient_id") === undefined ? "" : ` (to ${text(status, "recipient_id")})`
  }`

/** Every change of an envelope in a line each: inbound messages, statuses, or the field's name. */
export const changeLines = (payload: unknown): ReadonlyArray<ChangeLine> =>
  records(isRecord(payload) ? payload.entry : undefined).flatMap((entry) =>
    records(entry.changes).flatMap((change): ReadonlyArray<ChangeLine> => {
      const field = text(change, "field") ?? "change"
      const value = isRecord(change.value) ? change.value : {}
      const lines = [...records(value.messages).map(messageLine), ...records(value.statuses).map(statusLine)]
      return lines.length === 0 ? [{ field, summary: `${field} update` }] : lines.map((summary) => ({ field, summary }))
    })
  )

export interface SeenStatus {
  readonly status: string
  /** When the upstream says it happened (its Unix seconds), as ISO 8601. */
  readonly at: string | undefined
  readonly receivedAt: string
}

/** The status events of a message that arrived on the live feed since sign-in, oldest first. */
export const seenStatuses = (entries: ReadonlyArray<LiveEntry>, waMessageId: string): ReadonlyArray<SeenStatus> =>
  entries.flatMap((entry) =>
    entry.kind !== "event" ?
      [] :
      records(isRecord(entry.event.payload) ? entry.event.payload.entry : undefined).flatMap((e) =>
        records(e.changes).flatMap((change) =>
          records(isRecord(change.value) ? change.value.statuses : undefined)
            .filter((status) => text(status, "id") === waMessageId)
            .map((status) => {
              const seconds = Number(text(status, "timestamp"))
              return {
                status: text(status, "status") ?? "?",
                at: Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000).toISOString() : undefined,
                receivedAt: entry.event.receivedAt
              }
            })
        )
      )
  ).reverse()

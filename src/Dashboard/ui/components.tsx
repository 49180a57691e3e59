/** Pieces every page uses: loading a resource, errors, the once-shown secret, confirmation, paging, times. */
import type { ComponentChildren } from "preact"
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import type { ApiError, ApiResult } from "./api.js"
import { newerPage, olderPage, type PagePlace, pageText } from "./paging.js"
import { routedInPlace } from "./router.js"
import type { PageCursors } from "./types.js"

export type Loaded<A> =
  | { readonly state: "loading" }
  | { readonly state: "ready"; readonly value: A }
  | { readonly state: "failed"; readonly error: ApiError }

/**
 * Loads with `load` whenever `key` changes; `reload` loads again in place (the old value stays shown
 * meanwhile); `replace` shows a value an action answered (a PATCH's record) without asking again.
 */
export const useResource = <A extends unknown>(load: () => Promise<ApiResult<A>>, key: string) => {
  const [loaded, setLoaded] = useState<Loaded<A>>({ state: "loading" })
  const latest = useRef(0)
  const reload = useCallback(async () => {
    const run = ++latest.current
    const result = await load()
    // An older request answering late must not overwrite a newer one.
    if (run !== latest.current) return
    setLoaded(result.ok ? { state: "ready", value: result.value } : { state: "failed", error: result.error })
  }, [key])
  const replace = useCallback((value: A) => {
    ++latest.current
    setLoaded({ state: "ready", value })
  }, [])
  useEffect(() => {
    setLoaded({ state: "loading" })
    void reload()
  }, [reload])
  return { loaded, reload, replace }
}

/**
 * A form's or a button's action: `run` makes its API call with `busy` set, then shows the outcome
 * `done` words (undefined: none) or the API's refusal.
 */
export const useAction = () => {
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [busy, setBusy] = useState(false)
  const run = async <A extends unknown>(
    action: () => Promise<ApiResult<A>>,
    done: (value: A) => string | undefined
  ) => {
    setBusy(true)
    setError(undefined)
    setOutcome(undefined)
    const result = await action()
    setBusy(false)
    if (!result.ok) return setError(result.error)
    setOutcome(done(result.value))
  }
  return { error, outcome, busy, run, setError, setOutcome }
}

/** Calls `reload` every `ms` while `active` (queued deliveries change on their own). */
export const usePolling = (active: boolean, reload: () => Promise<void>, ms: number, after: unknown) => {
  useEffect(() => {
    if (!active) return
    const timer = setTimeout(() => void reload(), ms)
    return () => clearTimeout(timer)
  }, [active, after])
}

/** When a refusal says to come back (its Retry-After), in words, after its message. */
const retryAfterText = (error: ApiError) =>
  error.retryAfterSeconds === undefined
    ? ""
    : `${/[.!?]$/.test(error.message) ? "" : "."} Try again in ${error.retryAfterSeconds} s.`

/** An API failure, as its message (and when to try again, if it says). Announced at once to screen readers. */
export const ErrorNote = (props: { readonly error: ApiError | undefined; readonly prefix?: string }) =>
  props.error === undefined ? null : (
    <p class="note note-error" role="alert">
      {props.prefix === undefined ? null : <strong>{props.prefix}</strong>} {props.error.message}
      {retryAfterText(props.error)}
    </p>
  )

/** A polite live region: the outcome of an action, read out when it changes. */
export const Outcome = (props: { readonly text: string | undefined }) => (
  <p class="note note-ok" role="status" aria-live="polite" hidden={props.text === undefined}>
    {props.text ?? ""}
  </p>
)

/** What a page shows while loading or after failing to; `children` renders the value. */
export const Resource = <A extends unknown>(
  props: { readonly loaded: Loaded<A>; readonly what: string; readonly children: (value: A) => ComponentChildren }
) => {
  if (props.loaded.state === "loading") return <p class="muted" role="status">Loading {props.what}…</p>
  if (props.loaded.state === "failed") {
    return <ErrorNote error={props.loaded.error} prefix={`Could not load ${props.what}:`} />
  }
  return <>{props.children(props.loaded.value)}</>
}

const copyText = async (text: string, field: HTMLInputElement | null) => {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    // The Clipboard API needs a secure context (https or localhost); select the text for a manual copy instead.
    field?.select()
    return false
  }
}

/** A secret the API shows only once: its value, a copy button, and a way to close it for good. */
export const SecretOnce = (props: {
  readonly title: string
  readonly secret: string
  readonly children?: ComponentChildren
  readonly onDone: () => void
}) => {
  const field = useRef<HTMLInputElement>(null)
  const [copied, setCopied] = useState<string | undefined>(undefined)
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [])
  return (
    <section class="secret" aria-labelledby="secret-title">
      <h3 id="secret-title" tabIndex={-1} ref={heading}>{props.title}</h3>
      <p>Copy it now: it is shown only this once and cannot be read again.</p>
      <div class="secret-row">
        <label class="visually-hidden" for="secret-value">Secret</label>
        <input
          id="secret-value"
          class="mono"
          readOnly
          value={props.secret}
          ref={field}
          onFocus={() => field.current?.select()}
        />
        <button
          type="button"
          onClick={async () =>
            setCopied(
              (await copyText(props.secret, field.current))
                ? "Copied to the clipboard."
                : "Selected: press Ctrl+C (⌘C) to copy."
            )}
        >
          Copy
        </button>
      </div>
      {props.children}
      <p class="muted" role="status" aria-live="polite">{copied ?? ""}</p>
      <button type="button" class="secondary" onClick={props.onDone}>I have stored it — hide</button>
    </section>
  )
}

/** A destructive action asked twice: the first press asks, the second does it; Cancel (or Escape) backs out. */
export const ConfirmButton = (props: {
  readonly label: string
  readonly confirmLabel: string
  readonly question: string
  readonly onConfirm: () => void | Promise<void>
  readonly disabled?: boolean
  /** Destructive (the default) or merely consequential. */
  readonly tone?: "danger" | "normal"
}) => {
  const [asking, setAsking] = useState(false)
  const confirm = useRef<HTMLButtonElement>(null)
  useEffect(() => {
    if (asking) confirm.current?.focus()
  }, [asking])
  if (!asking) {
    return (
      <button
        type="button"
        class={props.tone === "normal" ? "secondary" : "danger-outline"}
        disabled={props.disabled}
        onClick={() => setAsking(true)}
      >
        {props.label}
      </button>
    )
  }
  return (
    <span
      class={props.tone === "normal" ? "confirm confirm-normal" : "confirm"}
      role="group"
      aria-label={props.question}
      onKeyDown={(e) => e.key === "Escape" && setAsking(false)}
    >
      <span class="confirm-question">{props.question}</span>
      <button
        type="button"
        class={props.tone === "normal" ? undefined : "danger"}
        ref={confirm}
        onClick={async () => {
          setAsking(false)
          await props.onConfirm()
        }}
      >
        {props.confirmLabel}
      </button>
      <button type="button" class="secondary" onClick={() => setAsking(false)}>Cancel</button>
    </span>
  )
}

/**
 * Previous and next over a paged list, by the answer's cursors (see paging.ts); `noun` is its item's
 * name, one and many. A capped total shows as what it is, a lower bound ("10,000+").
 */
export const Pager = (props: {
  readonly place: PagePlace
  readonly list: {
    readonly total: number
    readonly limit: number
    readonly total_capped?: boolean | undefined
    readonly cursors: PageCursors
  }
  readonly noun: readonly [string, string]
  readonly onPage: (place: PagePlace) => void
}) => {
  const newer = newerPage(props.place, props.list.cursors)
  const older = olderPage(props.place, props.list.cursors)
  return (
    <nav class="pager" aria-label={`Pages of ${props.noun[1]}`}>
      <button
        type="button"
        class="secondary"
        disabled={newer === undefined}
        onClick={() => newer !== undefined && props.onPage(newer)}
      >
        ← Previous
      </button>
      <span aria-live="polite">{pageText(props.place, props.list, props.noun)}</span>
      <button
        type="button"
        class="secondary"
        disabled={older === undefined}
        onClick={() => older !== undefined && props.onPage(older)}
      >
        Next →
      </button>
    </nav>
  )
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" })

export const formatTime = (iso: string) => {
  const at = new Date(iso)
  return Number.isNaN(at.getTime()) ? iso : dateTime.format(at)
}

/** How long ago, in words (for recent activity). */
export const ago = (iso: string, now: number = Date.now()) => {
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000)
  if (Number.isNaN(seconds)) return iso
  if (seconds < 60) return "just now"
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`
  return `${Math.floor(seconds / 86_400)} d ago`
}

const pad = (n: number) => String(n).padStart(2, "0")

/** An instant as `<input type="datetime-local">` writes it: local time, to the minute. */
export const localInputOf = (iso: string) => {
  const at = new Date(iso)
  if (Number.isNaN(at.getTime())) return ""
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${
    pad(at.getMinutes())
  }`
}

/** What a datetime-local input holds (local time), as an ISO 8601 instant; undefined when empty or not a time. */
export const isoOfLocalInput = (value: string): string | undefined => {
  if (value.trim() === "") return undefined
  const at = new Date(value)
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString()
}

/** The browser's time zone, which datetime-local inputs are in. */
export const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone

export const Time = (props: { readonly iso: string | null | undefined }) =>
  props.iso === null || props.iso === undefined
    ? <span class="muted">—</span>
    : <time dateTime={props.iso}>{formatTime(props.iso)}</time>

/** How long ago, for narrow columns; the time itself in its title. */
export const Ago = (props: { readonly iso: string | null | undefined }) =>
  props.iso === null || props.iso === undefined
    ? <span class="muted">—</span>
    : <time dateTime={props.iso} title={formatTime(props.iso)}>{ago(props.iso)}</time>

export type Tone = "ok" | "warn" | "bad" | "info" | "neutral"

export const Badge = (props: { readonly tone: Tone; readonly children: ComponentChildren }) =>
  <span class={`badge badge-${props.tone}`}>{props.children}</span>

/** A page's title, focused when the page opens in place so keyboard and screen reader users start there. */
export const PageTitle = (props: { readonly children: ComponentChildren; readonly lead?: ComponentChildren }) => {
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => {
    if (routedInPlace) heading.current?.focus()
  }, [])
  return (
    <header class="page-header">
      <h1 tabIndex={-1} ref={heading}>{props.children}</h1>
      {props.lead === undefined ? null : <p class="lead">{props.lead}</p>}
    </header>
  )
}

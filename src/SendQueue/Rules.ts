/**
 * The queue's rules, pure: what a queued send's failure means (retry, give up, or never again), the
 * backoff, Meta's pair rate, and the bound on a number's queue. The drainer (Drainer.ts) applies them.
 */
import type { Priority } from "../Domain/Vocabulary.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"

/** The lane as stored (`send_queue.priority`), so that ORDER BY priority puts transactional first. */
export const priorityRank: Record<Priority, number> = { transactional: 0, bulk: 1 }

/** `send_at` may be at most this far ahead (Twilio's scheduling window). */
export const SEND_AT_MAX_AHEAD_MS = 35 * 24 * 3600 * 1000

/** Meta's pair rate: about one message every 6 s from one number to one person ... */
export const PAIR_INTERVAL_MS = 6_000
/** ... with bursts of up to 45 in 6 s, borrowed from the time after them (131056 beyond). */
export const PAIR_BURST = 45

/** Graph codes a queued send retries after a delay: throughput, pair rate, maintenance (throughput upgrade). */
const RETRIED_CODES: ReadonlySet<number> = new Set([130429, 131056, 131057])

/** What to do with a queued send the upstream did not accept. */
export type FailureVerdict =
  /** Meta answered that it is not sent yet and may be later: try again after the backoff. */
  | { readonly _tag: "Retry"; readonly pairOnly: boolean }
  /** Meta refused it: another try would be refused alike. */
  | { readonly _tag: "Refused" }
  /** No answer after the request may have reached Meta: sending again could reach the person twice. */
  | { readonly _tag: "OutcomeUnknown" }

/**
 * A failure's verdict. A Graph 5xx or a retried code is an answer (the message was not taken), so a
 * retry cannot send it twice; a connection that could not be made (`network` before any byte was
 * written) is retried too. A timeout, or a connection lost while the request was out, may have
 * delivered it: never sent again.
 */
export const verdictOf = (error: UpstreamError): FailureVerdict => {
  // A 2xx Meta answered in a shape the hub does not read: the message may have gone.
  if (error.answeredOk === true) return { _tag: "OutcomeUnknown" }
  if (error.kind === "graph") {
    if (RETRIED_CODES.has(error.code)) return { _tag: "Retry", pairOnly: error.code === 131056 }
    return error.status >= 500 ? { _tag: "Retry", pairOnly: false } : { _tag: "Refused" }
  }
  return error.kind === "network" && isBeforeRequest(error) ? { _tag: "Retry", pairOnly: false } : {
    _tag: "OutcomeUnknown"
  }
}

/** A network failure that happened before the request left (the connection was refused or not made). */
const isBeforeRequest = (error: UpstreamError): boolean =>
  /ECONNREFUSED|ConnectionRefused|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH|connection refused|unable to connect|could not connect/i
    .test(
      error.message
    )

/** The delay before attempt `attempts + 1`: 1, 4, 16, 64 s, then every 4 minutes; Retry-After when longer. */
export const backoffMs = (attempts: number, retryAfterSeconds: number | undefined): number =>
  Math.max(Math.min(4 ** Math.max(0, attempts - 1), 240) * 1000, (retryAfterSeconds ?? 0) * 1000)

/**
 * Meta's pair rate as GCRA: a send is allowed while the pair's theoretical arrival time is at most the
 * burst ahead of now (SendQueue/Repo.ts `lease` checks it in SQL); each send moves it one interval on.
 */
export const nextPairTat = (tat: number | undefined, now: number): number =>
  Math.max(tat ?? now, now) + PAIR_INTERVAL_MS

/** The most sends a number's queue holds: `hours` of its throughput. */
export const queueCapacity = (messagesPerSecond: number, hours: number): number =>
  Math.floor(messagesPerSecond * hours * 3600)

/** Seconds until a full queue of `depth` has room for one more, at the number's rate. */
export const retryAfterForDepth = (depth: number, capacity: number, messagesPerSecond: number): number =>
  Math.max(1, Math.ceil((depth - capacity + 1) / messagesPerSecond))

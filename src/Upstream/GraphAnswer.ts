/** Reading Graph's answers: the error envelope, and what a call's caller relies on. */
import { Schema } from "effect"
import { parseJsonObject } from "../Domain/Json.js"
import type { GraphOutcome } from "../Metrics/Metrics.js"
import { parseRetryAfter } from "../Net/RetryAfter.js"
import { graphError, PARTIAL_OUTCOME_CODES, THROTTLING_CODES, type UpstreamError } from "./UpstreamError.js"

/** The User-Agent of every Graph call: lookaside media downloads are unreliable through fetch without one (research §3.2). */
export const USER_AGENT = "messaging-hub/0.1"

/** The most of a Graph answer the hub reads (a media download aside, which streams): its answers are JSON documents well below it. */
export const GRAPH_ANSWER_LIMIT = 16 * 1024 * 1024

const GraphErrorEnvelope = Schema.Struct({
  error: Schema.Struct({
    message: Schema.optional(Schema.String),
    code: Schema.optional(Schema.Number),
    error_subcode: Schema.optional(Schema.Number),
    fbtrace_id: Schema.optional(Schema.String),
    error_data: Schema.optional(Schema.Struct({ details: Schema.optional(Schema.String) }))
  })
})
const decodeErrorEnvelope = Schema.decodeUnknownOption(GraphErrorEnvelope)

/** An error answer: the Graph envelope when there is one, otherwise the HTTP status alone (code 0). */
export const decodeGraphError = (
  status: number,
  headers: Readonly<Record<string, string>>,
  text: string
): UpstreamError => {
  const retryAfter = parseRetryAfter(headers["retry-after"], Date.now())
  const parsed = parseJsonObject(text)
  const envelope = parsed === undefined ? undefined : decodeErrorEnvelope(parsed)
  if (envelope === undefined || envelope._tag === "None") {
    return graphError({
      status,
      code: 0,
      message: `The upstream answered HTTP ${status} without a Graph error body`,
      retryAfterSeconds: retryAfter
    })
  }
  const error = envelope.value.error
  return graphError({
    status,
    code: error.code ?? 0,
    message: error.message ?? `The upstream answered HTTP ${status}`,
    subcode: error.error_subcode,
    fbtraceId: error.fbtrace_id,
    details: error.error_data?.details,
    retryAfterSeconds: retryAfter,
    // The whole answer where it reports what the call did nonetheless (parsed is defined here).
    answer: error.code !== undefined && PARTIAL_OUTCOME_CODES.has(error.code) ? parsed : undefined
  })
}

/**
 * A 2xx answer whose body is not what the call returns: the upstream misbehaved, so it is a 502; but it
 * answered 2xx, so what was asked may be done (`answeredOk`: a queued send is not made again).
 */
export const malformed = (what: string) =>
  graphError({
    status: 502,
    code: 0,
    message: `The upstream answered ${what} with an unexpected body`,
    answeredOk: true
  })

/** A failed call's outcome, as the metrics count Graph calls. */
export const graphOutcomeOf = (e: UpstreamError): GraphOutcome => {
  if (e.kind !== "graph") return e.kind === "timeout" ? "timeout" : "network_error"
  if (e.status === 429 || THROTTLING_CODES.has(e.code)) return "throttled"
  return e.status >= 500 ? "upstream_error" : "refused"
}

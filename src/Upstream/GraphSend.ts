/**
 * The Graph send, POST /{phone-number-id}/messages (or /marketing_messages), as a plain promise of its outcome rather than
 * an effect: it is on every send's path, where the HttpClient's combinators and a fiber cost about
 * 60 µs of CPU a send (measured with scripts/bench.ts), a fifth of the whole. It keeps
 * GraphUpstream's rules for a call that may change something upstream: one deadline for the whole
 * exchange, never sent twice, kept-alive connections of our own client (src/Net/Pool.ts: fetch
 * parks at most 64 idle sockets, so under load most sends would open a TLS connection), or fetch
 * when a proxy is configured, since fetch honours it; and the same reading of the answer (GraphAnswer.ts).
 */
import { Duration, Either, Redacted, Schema, type Tracer } from "effect"
import { parseJsonObject } from "../Domain/Json.js"
import type { JsonObject } from "../Domain/Json.js"
import { type GraphRecorder, noMetrics } from "../Metrics/Metrics.js"
import { type Origin, originOf } from "../Net/Connection.js"
import { Deadline } from "../Net/Deadline.js"
import { type KeepAlivePool } from "../Net/Pool.js"
import { checkHeaders, HeaderRefused, requestBytes } from "../Net/RequestHead.js"
import type { BodyKept } from "../Net/ResponseReader.js"
import { annotate, endSpan, startSpan } from "../Tracing/Spans.js"
import { decodeGraphError, GRAPH_ANSWER_LIMIT, graphOutcomeOf, malformed, USER_AGENT } from "./GraphAnswer.js"
import type { SendEndpoint, SendMessageResponse, UpstreamTarget } from "./Upstream.js"
import { noAnswer, type UpstreamError } from "./UpstreamError.js"

const SendMessageResponseSchema = Schema.Struct({
  messaging_product: Schema.String,
  // A send to a business-scoped user id is answered {input, user_id}: wa_id only when the number is known.
  contacts: Schema.Array(Schema.Struct({ input: Schema.String, wa_id: Schema.optional(Schema.String) })),
  messages: Schema.NonEmptyArray(
    Schema.Struct({ id: Schema.String, message_status: Schema.optionalWith(Schema.String, { exact: true }) })
  )
})
const isSendMessageResponse = Schema.is(SendMessageResponseSchema)

/**
 * Whether the environment routes outgoing HTTP through a proxy. The pool connects directly, so the
 * send then stays on fetch, which honours these variables.
 */
export const usesProxy = (env: Readonly<Record<string, string | undefined>>): boolean =>
  ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"].some((name) => (env[name] ?? "") !== "")

/** The whole answer, up to 16 MB (GRAPH_ANSWER_LIMIT): a send's answer is a small JSON document. */
const WHOLE_ANSWER: BodyKept = { bytes: GRAPH_ANSWER_LIMIT, whole: true }

/** An answer's headers as a record: repeated ones join with ", " as fetch's Headers does. */
const joinedHeaders = (headers: ReadonlyArray<readonly [name: string, value: string]>): Record<string, string> => {
  const record: Record<string, string> = {}
  for (const [name, value] of headers) record[name] = record[name] === undefined ? value : `${record[name]}, ${value}`
  return record
}

/** fetch's headers as a record (its Headers already hold lower-case names). */
const headerRecord = (headers: globalThis.Headers): Record<string, string> => {
  const record: Record<string, string> = {}
  headers.forEach((value, name) => {
    record[name] = value
  })
  return record
}

/** An answer as far as the send reads it. */
interface Answered {
  readonly _tag: "Answered"
  readonly status: number
  readonly headers: () => Record<string, string>
  readonly text: string
}

/** Why an exchange ended without an answer: the deadline, or the network (the message says where). */
const failure = (
  deadline: Deadline,
  thrown: unknown,
  timedOut: () => UpstreamError,
  reading: boolean
): UpstreamError => {
  if (deadline.timedOut) return timedOut()
  const message = thrown instanceof Error && thrown.message !== "" ? thrown.message : reading ? "Decode" : "Transport"
  return noAnswer("network", reading ? `The upstream connection failed while reading the answer: ${message}` : message)
}

/** Where and how a send goes: fixed for the process, made once (makeGraphSend). */
interface SendRoute {
  /** Kept-alive connections; undefined: fetch. */
  readonly pool: KeepAlivePool | undefined
  /** Every send goes to the Graph URL's origin: parsed once. */
  readonly origin: Origin
  readonly timeoutMillis: number
  readonly timedOut: () => UpstreamError
}

const viaPool = async (
  route: SendRoute,
  pooled: KeepAlivePool,
  bytes: Buffer,
  deadline: Deadline
): Promise<Answered | UpstreamError> => {
  const outcome = await pooled.request({
    origin: route.origin,
    bytes,
    resendable: false,
    headRequest: false,
    kept: WHOLE_ANSWER,
    signal: deadline.signal
  })
  if (outcome._tag === "Aborted") return failure(deadline, new Error("the call was aborted"), route.timedOut, false)
  if (outcome._tag !== "Answer") return failure(deadline, new Error(outcome.message), route.timedOut, false)
  const answer = outcome.answer
  return {
    _tag: "Answered",
    status: answer.status,
    headers: () => joinedHeaders(answer.headers),
    text: answer.body.toString("utf8")
  }
}

const viaFetch = async (
  route: SendRoute,
  url: URL,
  headers: Record<string, string>,
  body: string,
  deadline: Deadline
): Promise<Answered | UpstreamError> => {
  let response: Response
  try {
    response = await fetch(url, { method: "POST", headers, body, signal: deadline.signal })
  } catch (thrown) {
    return failure(deadline, thrown, route.timedOut, false)
  }
  try {
    const text = await response.text()
    return { _tag: "Answered", status: response.status, headers: () => headerRecord(response.headers), text }
  } catch (thrown) {
    return failure(deadline, thrown, route.timedOut, true)
  }
}

/** The exchange, one way or the other; a header that cannot be sent is refused before anything is, either way. */
const exchange = async (
  route: SendRoute,
  url: URL,
  headers: Record<string, string>,
  body: string
): Promise<Answered | UpstreamError> => {
  const pool = route.pool
  if (pool === undefined) {
    const refused = checkHeaders(headers)
    if (refused !== undefined) return noAnswer("network", refused.message)
    const deadline = new Deadline(route.timeoutMillis)
    const answered = await viaFetch(route, url, headers, body, deadline)
    deadline.settle()
    return answered
  }
  const bytes = requestBytes("POST", `${url.pathname}${url.search}`, url.host, headers, body)
  if (bytes instanceof HeaderRefused) return noAnswer("network", bytes.message)
  const deadline = new Deadline(route.timeoutMillis)
  const answered = await viaPool(route, pool, bytes, deadline)
  deadline.settle()
  return answered
}

const outcomeOf = (answered: Answered | UpstreamError): Either.Either<SendMessageResponse, UpstreamError> => {
  if (answered._tag === "UpstreamError") return Either.left(answered)
  if (answered.status >= 400) return Either.left(decodeGraphError(answered.status, answered.headers(), answered.text))
  const parsed = parseJsonObject(answered.text)
  return parsed !== undefined && isSendMessageResponse(parsed)
    ? Either.right(parsed)
    : Either.left(malformed("the send"))
}

export type GraphSend = (
  target: UpstreamTarget,
  body: JsonObject,
  endpoint?: SendEndpoint,
  parent?: Tracer.AnySpan
) => Promise<Either.Either<SendMessageResponse, UpstreamError>>

/** The Graph call's span (when tracing): where it went and what came back, never the token or the body. */
const callSpan = (tracer: Tracer.Tracer, url: URL, target: UpstreamTarget, parent: Tracer.AnySpan | undefined) =>
  startSpan(tracer, "Graph.sendMessage", parent, "client", {
    "http.request.method": "POST",
    "server.address": url.hostname,
    "url.path": url.pathname,
    "hub.phone_number_id": target.phoneNumberId
  })

const endCallSpan = (
  span: Tracer.Span,
  answered: Answered | UpstreamError,
  outcome: Either.Either<SendMessageResponse, UpstreamError>
) => {
  annotate(span, {
    "http.response.status_code": answered._tag === "Answered" ? answered.status : undefined,
    "hub.wamid": Either.isRight(outcome) ? outcome.right.messages[0]?.id : undefined,
    "hub.graph_error_code": Either.isLeft(outcome) ? outcome.left.code : undefined,
    "hub.fbtrace_id": Either.isLeft(outcome) ? outcome.left.fbtraceId : undefined
  })
  endSpan(span, Either.isLeft(outcome) ? outcome.left.message : undefined)
}

export const makeGraphSend = (options: {
  readonly graphUrl: string
  readonly timeout: Duration.Duration
  /** Kept-alive connections; undefined: fetch. */
  readonly pool: KeepAlivePool | undefined
  /** Where each send's outcome and duration are recorded (nowhere if not given). */
  readonly recorder?: GraphRecorder
  /** When tracing, each call is a span (Tracing/Spans.ts). */
  readonly tracer?: Tracer.Tracer | undefined
}): GraphSend => {
  const tracer = options.tracer
  const recorder = options.recorder ?? noMetrics.graphCall("sendMessage")
  const route: SendRoute = {
    pool: options.pool,
    origin: originOf(new URL(options.graphUrl)),
    timeoutMillis: Duration.toMillis(options.timeout),
    timedOut: () =>
      noAnswer("timeout", `The upstream did not answer the send within ${Duration.format(options.timeout)}`)
  }

  return async (target, message, endpoint = "messages", parent) => {
    const url = new URL(`${options.graphUrl}/${encodeURIComponent(target.phoneNumberId)}/${endpoint}`)
    const headers = {
      authorization: `Bearer ${Redacted.value(target.accessToken)}`,
      "user-agent": USER_AGENT,
      "content-type": "application/json",
      accept: "application/json"
    }
    const startedAt = performance.now()
    const span = tracer === undefined ? undefined : callSpan(tracer, url, target, parent)
    const answered = await exchange(route, url, headers, JSON.stringify(message))
    const outcome = outcomeOf(answered)
    if (span !== undefined) endCallSpan(span, answered, outcome)
    recorder.observe(
      Either.isRight(outcome) ? "ok" : graphOutcomeOf(outcome.left),
      (performance.now() - startedAt) / 1000
    )
    return outcome
  }
}

/**
 * Cross-cutting HTTP behaviour: one error renderer for every failure (`{statusCode, message,
 * error?, details?}`, never a stack trace) and a structured request log with a request id.
 */
import { HttpApiBuilder, type HttpApp, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Context, Effect, Layer, LogLevel, Option, Predicate } from "effect"
import { randomBytes } from "node:crypto"
import { HubConfig } from "../Config.js"
import { EndpointPolicies, type RouteBodyLimit } from "../Domain/Access.js"
import {
  type ErrorBody,
  errorBody,
  type FieldIssue,
  type HubError,
  InternalServerError,
  isHubError,
  retryAfterOf,
  storageUnavailable,
  type TooManyRequests,
  type UpstreamFailure
} from "../Domain/Errors.js"
import { type HubMetrics, Metrics, noMetrics, type RouteRecorder } from "../Metrics/Metrics.js"
import { boundedRequest, declaredLength, isBodyTooLarge } from "../Net/BodyLimit.js"
import { unavailableOf } from "../Sql/Unavailable.js"

const errorResponse = (body: ErrorBody, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status: body.statusCode, headers })

/**
 * A failure's answer: its ErrorBody (as the Wire schemas encode it); for 429, and for a 503 that
 * knows when to come back, the Retry-After header; a 413 closes the connection (the rest of a body
 * over its limit is never read, so the connection cannot carry another request).
 */
const hubErrorResponse = (e: HubError) => {
  if (e._tag === "TooManyRequests") return errorResponse(errorBody(e), { "retry-after": String(retryAfterOf(e)) })
  if ((e._tag === "ServiceUnavailable" || e._tag === "UpstreamFailure") && e.retryAfterSeconds !== undefined) {
    return errorResponse(errorBody(e), { "retry-after": String(Math.max(1, Math.ceil(e.retryAfterSeconds))) })
  }
  return e._tag === "PayloadTooLarge"
    ? errorResponse(errorBody(e), { connection: "close" })
    : errorResponse(errorBody(e))
}

interface DecodeIssue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

const hasTag = (u: unknown, tag: string): boolean => Predicate.isTagged(u, tag)

const isDecodeIssues = (u: unknown): u is ReadonlyArray<DecodeIssue> =>
  Array.isArray(u) && u.every((i) => Predicate.hasProperty(i, "path") && Predicate.hasProperty(i, "message"))

/** Schema issues as `{field, message}`, the field written as a dotted path such as `image.caption`. */
const fieldIssues = (issues: ReadonlyArray<DecodeIssue>): ReadonlyArray<FieldIssue> => {
  const all = issues.map((issue) => ({ field: issue.path.map(String).join(".") || "body", message: issue.message }))
  // An optional field's schema is a union with undefined; its "Expected undefined" branch says nothing useful.
  return all.filter((issue) =>
    !issue.message.startsWith("Expected undefined") ||
    !all.some((other) => other !== issue && (other.field === issue.field || other.field.startsWith(`${issue.field}.`)))
  )
}

const validationResponse = (issues: ReadonlyArray<FieldIssue>) =>
  errorResponse({
    statusCode: 400,
    message: `Invalid request: ${issues.map((i) => `${i.field}: ${i.message}`).join("; ")}`,
    error: "validation_failed",
    details: issues
  })

/** What the edge knows of a request, from HttpApi's request or a fast-lane Request alike. */
export interface RequestLine {
  readonly method: string
  /** The path and query as received (the query is never logged). */
  readonly url: string
  /** The caller's `x-request-id`, if any. */
  readonly requestId: string | undefined
  /** The route's body limit (its `bodyLimit` annotation): its 413 answers a body found too large while read. */
  readonly bodyLimit: RouteBodyLimit
}

/** A body that went past its route's limit while it was read (Net/BodyLimit.ts), wherever the reader wrapped it. */
const bodyTooLargeResponse = (failure: unknown, request: RequestLine) =>
  Predicate.hasProperty(failure, "cause") && isBodyTooLarge(failure.cause)
    ? Option.some(hubErrorResponse(request.bodyLimit.tooLarge(undefined)))
    : Option.none()

const failureResponse = (failure: unknown, request: RequestLine) => {
  if (isHubError(failure)) return Option.some(hubErrorResponse(failure))
  const tooLarge = bodyTooLargeResponse(failure, request)
  if (Option.isSome(tooLarge)) return tooLarge
  if (
    hasTag(failure, "HttpApiDecodeError") && Predicate.hasProperty(failure, "issues") && isDecodeIssues(failure.issues)
  ) {
    return Option.some(validationResponse(fieldIssues(failure.issues)))
  }
  if (hasTag(failure, "RouteNotFound")) {
    return Option.some(errorResponse({
      statusCode: 404,
      message: `No route for ${request.method} ${request.url.split("?")[0]}`,
      error: "route_not_found"
    }))
  }
  return Option.none()
}

/** Request-body failures surface as defects from the platform (for example malformed JSON). */
const defectResponse = (defect: unknown, request: RequestLine) => {
  const tooLarge = bodyTooLargeResponse(defect, request)
  if (Option.isSome(tooLarge)) return tooLarge
  if (hasTag(defect, "RequestError") && Predicate.hasProperty(defect, "reason") && defect.reason === "Decode") {
    return Option.some(
      errorResponse({
        statusCode: 400,
        message: "Malformed request body: it is not valid JSON",
        error: "malformed_body"
      })
    )
  }
  if (hasTag(defect, "MultipartError") && Predicate.hasProperty(defect, "reason")) {
    return Option.some(
      defect.reason === "FileTooLarge" || defect.reason === "BodyTooLarge" || defect.reason === "FieldTooLarge"
        ? errorResponse({ statusCode: 413, message: "The upload is too large", error: "payload_too_large" })
        : errorResponse({ statusCode: 400, message: "Malformed multipart body", error: "malformed_body" })
    )
  }
  return Option.none()
}

const internalError = errorResponse(errorBody(new InternalServerError()))

const isUpstreamFailure = (e: HubError): e is UpstreamFailure | TooManyRequests =>
  e._tag === "UpstreamFailure" || (e._tag === "TooManyRequests" && e.error === "upstream_rate_limited")

const fieldOf = (u: unknown, key: string): unknown => (Predicate.hasProperty(u, key) ? u[key] : undefined)

/**
 * An upstream refusal or failure, at warn, under the request's id: the Graph code, subcode and
 * fbtrace_id are what Meta's support asks for.
 */
const logUpstreamFailure = (e: UpstreamFailure | TooManyRequests) => {
  const upstream = fieldOf(fieldOf(e, "details"), "upstream")
  const graph = (key: string) => {
    const value = fieldOf(upstream, key)
    return value === undefined ? {} : { [key]: value }
  }
  return Effect.logWarning(upstream === undefined ? "An upstream call failed" : "The upstream refused a request").pipe(
    Effect.annotateLogs({
      status: e.statusCode,
      error: e.error ?? "",
      message: e.message,
      ...graph("code"),
      ...graph("error_subcode"),
      ...graph("fbtrace_id")
    })
  )
}

const storageResponse = hubErrorResponse(
  storageUnavailable("The database cannot take the request now; retry after the Retry-After header's seconds")
)

/** A storage failure at warn (an outage fails many requests alike): what the database said, not the whole cause. */
const logStorageFailure = (error: unknown) =>
  Effect.logWarning("The database could not take a request; answered 503").pipe(
    Effect.annotateLogs({
      error: String(fieldOf(error, "message") ?? ""),
      cause: String(fieldOf(fieldOf(error, "cause"), "message") ?? "")
    })
  )

/**
 * Renders every failure the same way. The database unavailable (Sql/Unavailable.ts: gone, restarting,
 * full, read-only), wherever a handler let it through, is a 503 storage_unavailable with Retry-After,
 * never a 500: one place for every route. A statement at fault, like every other unexpected failure, is
 * logged and becomes a bare 500 (retrying would not mend it); the upstream's failures are at warn.
 */
const renderFailures = <E, R>(
  answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  request: RequestLine
) =>
  Effect.catchAllCause(answer, (cause) => {
    if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
    const rendered = Option.orElse(
      Option.flatMap(Cause.failureOption(cause), (failure) => failureResponse(failure, request)),
      () => Option.flatMap(Cause.dieOption(cause), (defect) => defectResponse(defect, request))
    )
    if (Option.isNone(rendered)) {
      const storage = unavailableOf(cause)
      return Option.isSome(storage)
        ? Effect.as(logStorageFailure(storage.value), storageResponse)
        : Effect.as(Effect.logError("Unhandled failure", cause), internalError)
    }
    const failure = Cause.failureOption(cause)
    return Option.isSome(failure) && isHubError(failure.value) && isUpstreamFailure(failure.value)
      ? Effect.as(logUpstreamFailure(failure.value), rendered.value)
      : Effect.succeed(rendered.value)
  })

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/

/** Request ids: a per-process random prefix and a counter, unique without a UUID per request. */
const processPrefix = randomBytes(4).toString("hex")
let requestSequence = 0
const nextRequestId = () => `${processPrefix}-${(++requestSequence).toString(36)}`

/** The id an answer carries and its logs are annotated with: the caller's `x-request-id` when sane, otherwise a new one. */
export const requestIdFor = (offered: string | undefined) =>
  offered !== undefined && REQUEST_ID.test(offered) ? offered : nextRequestId()

/** The access-log line of an answered request (never its query string or headers, which may carry secrets). */
export const logRequest = (request: RequestLine, status: number, startedAt: number) =>
  Effect.logInfo("request").pipe(Effect.annotateLogs({
    method: request.method,
    path: request.url.split("?")[0],
    status,
    durationMs: Math.round((performance.now() - startedAt) * 10) / 10
  }))

/**
 * The edge of one request: failures rendered as JSON, an `x-request-id` (the caller's when sane),
 * its route's metrics (status, and the time until its answer begins, from `started`), and, when info
 * logs are on, one access-log line (never the query string or headers, which may carry secrets).
 * Handler logs carry the request id. Fails only when interrupted.
 */
export const atEdge = <E, R>(
  request: RequestLine,
  logRequests: boolean,
  answer: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>,
  recorder: RouteRecorder,
  started: number = performance.now()
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R> => {
  const requestId = requestIdFor(request.requestId)
  const respond = Effect.map(renderFailures(answer, request), (response) => {
    recorder.observe(response.status, (performance.now() - started) / 1000)
    return HttpServerResponse.setHeader(response, "x-request-id", requestId)
  })
  if (!logRequests) return Effect.annotateLogs(respond, "requestId", requestId)
  return Effect.annotateLogs(
    Effect.tap(respond, (response) => logRequest(request, response.status, started)),
    "requestId",
    requestId
  )
}

/**
 * The edge around every request HttpApi serves. Its body is bounded before the route reads it: a
 * declared length over the route's limit is refused at once, and a body of no declared length is
 * counted as it streams: the limit is the route's `bodyLimit` annotation (Domain/Access.ts).
 * The edge matches the route itself (find-my-way: about 0.2 µs a request, measured over the HubApi routes) although HttpApi's router
 * matches it again: a global middleware runs before routing and cannot see that match, and the limit
 * must hold before anything reads the body, unmatched paths included.
 */
export const edge =
  (logRequests: boolean, policies: EndpointPolicies["Type"], metrics: HubMetrics = noMetrics) =>
  (app: HttpApp.Default): HttpApp.Default =>
    Effect.withFiberRuntime((fiber) => {
      const request = Context.unsafeGet(fiber.currentContext, HttpServerRequest.HttpServerRequest)
      const limit = policies.bodyLimitOf(request.method, request.url)
      const line: RequestLine = {
        method: request.method,
        url: request.url,
        requestId: request.headers["x-request-id"],
        bodyLimit: limit
      }
      const recorder = metrics.routeOf(request.method, request.url)
      const declared = declaredLength(request.headers["content-length"])
      if (declared !== undefined && declared > limit.bytes) {
        return atEdge(line, logRequests, Effect.fail(limit.tooLarge(declared)), recorder)
      }
      const source = request.source
      const streamed = declared === undefined && source instanceof Request && source.body !== null
      return atEdge(
        line,
        logRequests,
        streamed
          ? Effect.provideService(
            app,
            HttpServerRequest.HttpServerRequest,
            HttpServerRequest.fromWeb(boundedRequest(source, limit.bytes))
          )
          : app,
        recorder
      )
    })

/** Whether the access log is on: info-level logging. */
export const logsRequests = (config: { readonly logLevel: LogLevel.LogLevel }) =>
  LogLevel.greaterThanEqual(LogLevel.Info, config.logLevel)

export const HttpEdgeLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const config = yield* HubConfig
    return HttpApiBuilder.middleware(edge(logsRequests(config), yield* EndpointPolicies, yield* Metrics))
  })
)

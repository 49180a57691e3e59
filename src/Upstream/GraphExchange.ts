/**
 * Making a Graph call other than the send (GraphCall.ts): over @effect/platform's HttpClient, within
 * its timeout on the wall clock (its answer's body included), at most 16 MB of its answer read
 * (GRAPH_ANSWER_LIMIT), retried if it only reads, in a place under the Graph origin's connection cap
 * unless it is an upload or a download, and its outcome and duration recorded.
 */
import { HttpClient, type HttpClientResponse } from "@effect/platform"
import type { HttpClientError } from "@effect/platform/HttpClientError"
import { Clock, Duration, Effect, Schedule, Stream } from "effect"
import { type JsonObject, parseJsonObject } from "../Domain/Json.js"
import { type Origin, originOf } from "../Net/Connection.js"
import type { KeepAlivePool } from "../Net/Pool.js"
import { checkHeaders } from "../Net/RequestHead.js"
import { decodeGraphError, GRAPH_ANSWER_LIMIT, graphOutcomeOf, malformed } from "./GraphAnswer.js"
import type { Call } from "./GraphCall.js"
import { graphVersionOf } from "./GraphVersion.js"
import { noAnswer, THROTTLING_CODES, type UpstreamError } from "./UpstreamError.js"

/** What every call other than the send goes through (makeGraphClient). */
export interface GraphClient {
  readonly http: HttpClient.HttpClient
  /** The send's kept-alive pool, whose cap the other calls take a place under; undefined with a proxy. */
  readonly pool: KeepAlivePool | undefined
  /** The Graph URL's origin: the one whose cap the calls take a place under. */
  readonly origin: Origin
  /** Network deadlines and retry delays are wall-clock time, even where a test replaced the Clock. */
  readonly wallClock: Clock.Clock
  readonly retrySchedule: Schedule.Schedule<[Duration.Duration, number]>
  /** Warns once when the Graph answers another version than HUB_GRAPH_URL asks for. */
  readonly noteVersion: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<void>
}

/**
 * Meta serves an older or newer version than asked for when the asked one is gone or the app is
 * pinned: said once per process, from the answers' `facebook-api-version`.
 */
const versionNote = (graphUrl: string) => {
  const askedVersion = graphVersionOf(graphUrl)
  let versionNoted = false
  return (response: HttpClientResponse.HttpClientResponse) => {
    const answered = response.headers["facebook-api-version"]
    if (versionNoted || answered === undefined || askedVersion === undefined || answered === askedVersion) {
      return Effect.void
    }
    versionNoted = true
    return Effect.logWarning(
      `The Graph API answers with version ${answered}, not the ${askedVersion} HUB_GRAPH_URL asks for`
    )
  }
}

export const makeGraphClient = (options: {
  readonly http: HttpClient.HttpClient
  readonly pool: KeepAlivePool | undefined
  readonly graphUrl: string
  /** The first retry's delay, doubling (jittered) for the second and last. */
  readonly retryBase: Duration.Duration
}): GraphClient => ({
  // Spans would only cost time (no exporter is configured), and their headers are not the Graph's business.
  http: options.http.pipe(HttpClient.withTracerDisabledWhen(() => true)),
  pool: options.pool,
  origin: originOf(new URL(options.graphUrl)),
  wallClock: Clock.make(),
  retrySchedule: Schedule.exponential(options.retryBase).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(2))
  ),
  noteVersion: versionNote(options.graphUrl)
})

export const describeHttpError = (e: HttpClientError): string => {
  const cause = e.cause
  if (cause instanceof Error && cause.message !== "") return cause.message
  return e.reason
}

/** Worth another try: the upstream failed transiently or was busy, and the call only reads. */
const isTransient = (e: UpstreamError) =>
  e.kind === "network" || (e.kind === "graph" && (e.status >= 500 || e.status === 429 || THROTTLING_CODES.has(e.code)))

/**
 * A place under `origin`'s cap in `pool`, waited for in turn; interrupting the wait gives it up.
 * The place is the caller's to give back.
 */
const placeIn = (pool: KeepAlivePool, origin: Origin) =>
  Effect.async<() => void>((resume, signal) => {
    void pool.hold(origin, signal).then((giveBack) => {
      // Undefined: the wait was interrupted. A place granted just as it was is given back at once.
      if (giveBack === undefined) return
      if (signal.aborted) return giveBack()
      resume(Effect.succeed(giveBack))
    }, (defect: unknown) => resume(Effect.die(defect)))
  })

/** `exchange` in a place under `origin`'s cap in `pool`, given back when it ends however it ends. */
const inPlace = <A, E>(pool: KeepAlivePool, origin: Origin, exchange: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      restore(placeIn(pool, origin)),
      (giveBack) => Effect.ensuring(restore(exchange), Effect.sync(giveBack))
    )
  )

const utf8 = new TextDecoder()

/**
 * The answer's body as text, read while it streams and refused at the first byte past `limit`
 * (`tooLarge`); an answer without a body is "".
 */
const textAtMost = <E>(
  response: HttpClientResponse.HttpClientResponse,
  limit: number,
  failed: (e: HttpClientError) => E,
  tooLarge: () => E
): Effect.Effect<string, E> =>
  Effect.suspend(() => {
    const parts: Array<Uint8Array> = []
    let length = 0
    const body = Stream.catchAll(response.stream, (e) => (e.reason === "EmptyBody" ? Stream.empty : Stream.fail(e)))
    return Stream.mapError(body, failed).pipe(
      Stream.runForEach((chunk) => {
        length += chunk.byteLength
        if (length > limit) return Effect.fail(tooLarge())
        parts.push(chunk)
        return Effect.void
      }),
      Effect.map(() => utf8.decode(Buffer.concat(parts, length)))
    )
  })

export const timedOut = (what: string, timeout: Duration.Duration) =>
  noAnswer("timeout", `The upstream did not answer ${what} within ${Duration.format(timeout)}`)

/** A failed exchange: a network failure (possibly while reading the answer); its deadline is `inTime`'s. */
const failed = (reading: boolean) => (e: HttpClientError) =>
  noAnswer(
    "network",
    reading
      ? `The upstream connection failed while reading the answer: ${describeHttpError(e)}`
      : describeHttpError(e)
  )

const readText = (call: Call, response: HttpClientResponse.HttpClientResponse) =>
  textAtMost(
    response,
    GRAPH_ANSWER_LIMIT,
    failed(true),
    () =>
      noAnswer("network", `The upstream answered ${call.what} with more than ${GRAPH_ANSWER_LIMIT / 1024 / 1024} MB`)
  )

/**
 * Sends the request and fails with the decoded Graph error unless the answer is 2xx. A header that
 * would break the request is refused before anything is sent, as on our own client.
 */
export const answer = (client: GraphClient, call: Call) => {
  const refused = checkHeaders(call.request.headers)
  if (refused !== undefined) return Effect.fail(noAnswer("network", refused.message))
  return client.http.execute(call.request).pipe(
    Effect.mapError(failed(false)),
    Effect.tap(client.noteVersion),
    Effect.flatMap((response) =>
      response.status < 400 ?
        Effect.succeed(response) :
        Effect.flatMap(readText(call, response), (text) =>
          Effect.fail(decodeGraphError(response.status, response.headers, text)))
    )
  )
}

/**
 * One try, within the call's timeout on the wall clock (the wait for a place under the cap, the
 * answer and its body); the timeout interrupts it, which aborts the request.
 */
export const inTime = <A>(
  client: GraphClient,
  call: Call,
  attempt: Effect.Effect<A, UpstreamError>
): Effect.Effect<A, UpstreamError> => {
  const placed = call.capped && client.pool !== undefined ? inPlace(client.pool, client.origin, attempt) : attempt
  return Effect.withClock(
    Effect.timeoutFail(placed, { duration: call.timeout, onTimeout: () => timedOut(call.what, call.timeout) }),
    client.wallClock
  )
}

/** Reads are retried, their delays on the wall clock; a write is tried once. */
export const attempts = <A>(client: GraphClient, call: Call, once: Effect.Effect<A, UpstreamError>) =>
  call.retry
    ? Effect.withClock(Effect.retry(once, { schedule: client.retrySchedule, while: isTransient }), client.wallClock)
    : once

/**
 * The call's outcome and duration recorded, its retries included (an interrupted call is not); a
 * span when tracing, named by the call, with its method and path (never its token, query or body).
 */
export const observed = <A>(call: Call, made: Effect.Effect<A, UpstreamError>): Effect.Effect<A, UpstreamError> =>
  Effect.suspend(() => {
    const started = performance.now()
    const seconds = () => (performance.now() - started) / 1000
    return Effect.tapBoth(made, {
      onSuccess: () => Effect.sync(() => call.recorder.observe("ok", seconds())),
      onFailure: (e) => Effect.sync(() => call.recorder.observe(graphOutcomeOf(e), seconds()))
    })
  }).pipe(Effect.withSpan(`Graph.${call.name}`, {
    kind: "client",
    attributes: { "http.request.method": call.request.method, "url.path": URL.parse(call.request.url)?.pathname }
  }))

const unobservedJson = (client: GraphClient, call: Call): Effect.Effect<JsonObject, UpstreamError> =>
  attempts(
    client,
    call,
    inTime(client, call, Effect.flatMap(answer(client, call), (response) => readText(call, response))).pipe(
      Effect.flatMap((text) => {
        const body = parseJsonObject(text)
        return body === undefined ? Effect.fail(malformed(call.what)) : Effect.succeed(body)
      })
    )
  )

/** The call's answer, a JSON object. */
export const json = (client: GraphClient, call: Call): Effect.Effect<JsonObject, UpstreamError> =>
  observed(call, unobservedJson(client, call))

/** The body itself (extra fields kept), once it has the fields the caller relies on. */
export const checked = <A>(
  client: GraphClient,
  call: Call,
  is: (u: unknown) => u is A
): Effect.Effect<A, UpstreamError> =>
  observed(
    call,
    Effect.flatMap(
      unobservedJson(client, call),
      (body) => (is(body) ? Effect.succeed(body) : Effect.fail(malformed(call.what)))
    )
  )

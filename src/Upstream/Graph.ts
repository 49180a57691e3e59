/**
 * GraphUpstream: the real WhatsApp Business Cloud API (Graph). The send, on every send's path, goes
 * over our own kept-alive client (GraphSend.ts, src/Net/Pool.ts); every other call is cold and goes
 * through @effect/platform's HttpClient over fetch (FetchHttpClient). Every call gets a total timeout,
 * its answer's body included, and the hub reads at most 16 MB of an answer (GRAPH_ANSWER_LIMIT).
 * Reads (GETs) are retried on 5xx, throttling and network errors, while calls that may have changed
 * something upstream (sends, uploads, creates, updates) never are. Calls other than uploads and
 * downloads count against HUB_MAX_CONNECTIONS_PER_ORIGIN together with the send's connections.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import type { HttpClientError } from "@effect/platform/HttpClientError"
import { Clock, Duration, Effect, Layer, Redacted, Schedule, Schema, Stream } from "effect"
import { HubConfig } from "../Config.js"
import { parseJsonObject } from "../Domain/Json.js"
import { type JsonObject } from "../Domain/Json.js"
import { type GraphRecorder, Metrics } from "../Metrics/Metrics.js"
import { type Origin, originOf } from "../Net/Connection.js"
import { type KeepAlivePool, makeKeepAlivePool } from "../Net/Pool.js"
import { checkHeaders } from "../Net/RequestHead.js"
import { decodeGraphError, GRAPH_ANSWER_LIMIT, graphOutcomeOf, malformed, USER_AGENT } from "./GraphAnswer.js"
import { makeGraphSend, usesProxy } from "./GraphSend.js"
import { graphVersionOf, warnAboutGraphVersion } from "./GraphVersion.js"
import { multipartBody, type MultipartField } from "./Multipart.js"
import { type GraphQuery, type MediaInfo, type UploadFile, Upstream, type UpstreamTarget } from "./Upstream.js"
import { noAnswer, THROTTLING_CODES, type UpstreamError } from "./UpstreamError.js"

const MediaInfoSchema = Schema.Struct({
  url: Schema.String,
  mime_type: Schema.String,
  sha256: Schema.String,
  file_size: Schema.Union(Schema.Number, Schema.String),
  id: Schema.String
})
const isMediaInfo = Schema.is(MediaInfoSchema)
const isUploadResponse = Schema.is(Schema.Struct({ id: Schema.String }))

const describeHttpError = (e: HttpClientError): string => {
  const cause = e.cause
  if (cause instanceof Error && cause.message !== "") return cause.message
  return e.reason
}

/** Worth another try: the upstream failed transiently or was busy, and the call only reads. */
const isTransient = (e: UpstreamError) =>
  e.kind === "network" || (e.kind === "graph" && (e.status >= 500 || e.status === 429 || THROTTLING_CODES.has(e.code)))

/** Each Graph call but the send (GraphSend.ts), named as the Upstream method that makes it (the metrics' call label). */
type GraphCall = Exclude<keyof Upstream["Type"], "sendMessage">

/** What each call is called in error messages. */
const WHAT: Readonly<Record<GraphCall, string>> = {
  uploadMedia: "the media upload",
  getMedia: "the media lookup",
  downloadMedia: "the media download",
  createTemplate: "the template creation",
  listTemplates: "the template list",
  getTemplate: "the template lookup",
  getSettings: "the settings read",
  updateSettings: "the settings update",
  listPhoneNumbers: "the phone number list",
  callAction: "the call action",
  listActivities: "the activity list",
  getComplianceInfo: "the compliance info",
  listQrCodes: "the QR code list",
  getQrCode: "the QR code lookup",
  listFlows: "the flow list",
  listFlowAssets: "the flow asset list",
  uploadFlowAsset: "the flow asset upload",
  deprecateFlow: "the flow deprecation",
  getGroup: "the group lookup",
  listGroups: "the group list",
  getBusinessProfile: "the business profile",
  blockUsers: "the user block",
  unblockUsers: "the user unblock",
  listBlockedUsers: "the blocked user list"
}

type Call = {
  readonly request: HttpClientRequest.HttpClientRequest
  readonly what: string
  /** Where the call's outcome and duration are recorded. */
  readonly recorder: GraphRecorder
  /** Reads are retried on transient failures; writes never are. */
  readonly retry: boolean
  /** Each try's total time, its answer's body included. */
  readonly timeout: Duration.Duration
  /** It takes a place under the Graph origin's connection cap (uploads and downloads do not). */
  readonly capped: boolean
}

/** The hosts Meta serves media downloads from (the `url` of a media object). */
const META_MEDIA_HOSTS = ["fbsbx.com", "fbcdn.net", "facebook.com", "whatsapp.net"]

/**
 * Whether a media URL may be sent the instance's access token: https on one of Meta's media hosts
 * (or one below them), or the origin of HUB_GRAPH_URL itself (where the operator points the hub).
 */
export const isMediaHost = (mediaUrl: string, graphUrl: string): boolean => {
  const url = URL.parse(mediaUrl)
  if (url === null) return false
  if (url.origin === URL.parse(graphUrl)?.origin) return true
  return url.protocol === "https:" && url.username === "" &&
    META_MEDIA_HOSTS.some((host) => url.hostname === host || url.hostname.endsWith(`.${host}`))
}

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

const makeGraphUpstream = Effect.gen(function*() {
  const config = yield* HubConfig
  const metrics = yield* Metrics
  // Spans would only cost time (no exporter is configured), and their headers are not the Graph's business.
  const http = (yield* HttpClient.HttpClient).pipe(HttpClient.withTracerDisabledWhen(() => true))
  yield* warnAboutGraphVersion(config.graphUrl)
  // The send goes over kept-alive connections (GraphSend.ts), as many as are in flight at once, unless
  // a proxy is configured: fetch honours it, the pool connects directly.
  const pool = usesProxy(process.env)
    ? undefined
    : yield* Effect.acquireRelease(
      Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 1024, maxPerOrigin: config.maxConnectionsPerOrigin })),
      (p) => Effect.sync(() => p.close())
    )
  // fetch cannot cap its connections: the other calls to the Graph API take a place under the same
  // cap as the send's connections (KeepAlivePool.hold), so the exchanges in flight to it stay within
  // HUB_MAX_CONNECTIONS_PER_ORIGIN. With a proxy everything goes through fetch, uncapped.
  const graphOrigin = originOf(new URL(config.graphUrl))
  // Network deadlines and retry delays are wall-clock time, even where a test replaced the Clock.
  const wallClock = Clock.make()
  const retrySchedule = Schedule.exponential(config.graphRetryBase).pipe(
    Schedule.jittered,
    Schedule.intersect(Schedule.recurs(2))
  )

  const url = (...segments: ReadonlyArray<string>) => `${config.graphUrl}/${segments.map(encodeURIComponent).join("/")}`

  const authorized = (target: UpstreamTarget, request: HttpClientRequest.HttpClientRequest) =>
    request.pipe(
      HttpClientRequest.bearerToken(Redacted.value(target.accessToken)),
      HttpClientRequest.setHeader("user-agent", USER_AGENT)
    )

  const withQuery = (query: GraphQuery) => {
    const params: Array<[string, string]> = []
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.push([key, value])
    return HttpClientRequest.setUrlParams(params)
  }

  const get = (target: UpstreamTarget, call: GraphCall, path: ReadonlyArray<string>, query: GraphQuery = {}): Call => ({
    request: authorized(
      target,
      HttpClientRequest.get(url(...path)).pipe(withQuery(query), HttpClientRequest.acceptJson)
    ),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: true,
    timeout: config.graphTimeout,
    capped: true
  })

  /** A POST, or another method that changes something (DELETE), with a JSON body. */
  const postJson = (
    target: UpstreamTarget,
    call: GraphCall,
    path: ReadonlyArray<string>,
    body: JsonObject,
    method: "POST" | "DELETE" = "POST"
  ): Call => ({
    request: authorized(
      target,
      HttpClientRequest.make(method)(url(...path)).pipe(
        HttpClientRequest.bodyUnsafeJson(body),
        HttpClientRequest.acceptJson
      )
    ),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    timeout: config.graphTimeout,
    capped: true
  })

  /** A POST without a body (actions such as deprecate). */
  const postAction = (target: UpstreamTarget, call: GraphCall, path: ReadonlyArray<string>): Call => ({
    request: authorized(target, HttpClientRequest.post(url(...path)).pipe(HttpClientRequest.acceptJson)),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    timeout: config.graphTimeout,
    capped: true
  })

  const postForm = (
    target: UpstreamTarget,
    call: GraphCall,
    path: ReadonlyArray<string>,
    fields: ReadonlyArray<MultipartField>
  ): Call => ({
    request: authorized(
      target,
      HttpClientRequest.post(url(...path)).pipe(
        HttpClientRequest.setBody(multipartBody(fields)),
        HttpClientRequest.acceptJson
      )
    ),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    timeout: config.graphUploadTimeout,
    capped: false
  })

  const timedOut = (what: string, timeout: Duration.Duration) =>
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

  // Meta serves an older or newer version than asked for when the asked one is gone or the app is
  // pinned: said once per process, from the answers' `facebook-api-version`.
  const askedVersion = graphVersionOf(config.graphUrl)
  let versionNoted = false
  const noteVersion = (response: HttpClientResponse.HttpClientResponse) => {
    const answered = response.headers["facebook-api-version"]
    if (versionNoted || answered === undefined || askedVersion === undefined || answered === askedVersion) {
      return Effect.void
    }
    versionNoted = true
    return Effect.logWarning(
      `The Graph API answers with version ${answered}, not the ${askedVersion} HUB_GRAPH_URL asks for`
    )
  }

  /**
   * Sends the request and fails with the decoded Graph error unless the answer is 2xx. A header that
   * would break the request is refused before anything is sent, as on our own client.
   */
  const answer = (call: Call) => {
    const refused = checkHeaders(call.request.headers)
    if (refused !== undefined) return Effect.fail(noAnswer("network", refused.message))
    return http.execute(call.request).pipe(
      Effect.mapError(failed(false)),
      Effect.tap(noteVersion),
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
  const inTime = <A>(call: Call, attempt: Effect.Effect<A, UpstreamError>): Effect.Effect<A, UpstreamError> => {
    const placed = call.capped && pool !== undefined ? inPlace(pool, graphOrigin, attempt) : attempt
    return Effect.withClock(
      Effect.timeoutFail(placed, { duration: call.timeout, onTimeout: () => timedOut(call.what, call.timeout) }),
      wallClock
    )
  }

  /** Reads are retried, their delays on the wall clock; a write is tried once. */
  const attempts = <A>(call: Call, once: Effect.Effect<A, UpstreamError>) =>
    call.retry ? Effect.withClock(Effect.retry(once, { schedule: retrySchedule, while: isTransient }), wallClock) : once

  /** The call's outcome and duration recorded, its retries included (an interrupted call is not). */
  const observed = <A>(call: Call, made: Effect.Effect<A, UpstreamError>): Effect.Effect<A, UpstreamError> =>
    Effect.suspend(() => {
      const started = performance.now()
      const seconds = () => (performance.now() - started) / 1000
      return Effect.tapBoth(made, {
        onSuccess: () => Effect.sync(() => call.recorder.observe("ok", seconds())),
        onFailure: (e) => Effect.sync(() => call.recorder.observe(graphOutcomeOf(e), seconds()))
      })
    })

  const unobservedJson = (call: Call): Effect.Effect<JsonObject, UpstreamError> =>
    attempts(
      call,
      inTime(call, Effect.flatMap(answer(call), (response) => readText(call, response))).pipe(
        Effect.flatMap((text) => {
          const body = parseJsonObject(text)
          return body === undefined ? Effect.fail(malformed(call.what)) : Effect.succeed(body)
        })
      )
    )

  const json = (call: Call): Effect.Effect<JsonObject, UpstreamError> => observed(call, unobservedJson(call))

  /** The body itself (extra fields kept), once it has the fields the caller relies on. */
  const checked = <A>(call: Call, is: (u: unknown) => u is A): Effect.Effect<A, UpstreamError> =>
    observed(
      call,
      Effect.flatMap(
        unobservedJson(call),
        (body) => (is(body) ? Effect.succeed(body) : Effect.fail(malformed(call.what)))
      )
    )

  const filePart = (file: UploadFile): MultipartField => ({
    name: "file",
    filename: file.filename,
    contentType: file.mimeType,
    content: file.content
  })

  return Upstream.of({
    sendMessage: makeGraphSend({
      graphUrl: config.graphUrl,
      timeout: config.graphTimeout,
      pool,
      recorder: metrics.graphCall("sendMessage")
    }),
    uploadMedia: (target, file) => {
      const fields = [
        { name: "messaging_product", value: "whatsapp" },
        { name: "type", value: file.mimeType },
        filePart(file)
      ]
      return checked(postForm(target, "uploadMedia", [target.phoneNumberId, "media"], fields), isUploadResponse)
    },
    getMedia: (target, mediaId) =>
      checked<MediaInfo>(get(target, "getMedia", [mediaId], { phone_number_id: target.phoneNumberId }), isMediaInfo),
    downloadMedia: (target, mediaUrl) => {
      // The instance's access token goes only where Meta serves media, whatever URL the Graph answered.
      if (!isMediaHost(mediaUrl, config.graphUrl)) {
        return Effect.fail(
          noAnswer("network", "The upstream answered a media URL that is not on Meta's media hosts; it was not fetched")
        )
      }
      const call: Call = {
        request: authorized(target, HttpClientRequest.get(mediaUrl)),
        what: WHAT.downloadMedia,
        recorder: metrics.graphCall("downloadMedia"),
        retry: true,
        timeout: config.graphUploadTimeout,
        capped: false
      }
      // The answer within the upload timeout, and its body too (below).
      const headersInTime = inTime(call, answer(call))
      const startedAt = Date.now()
      return observed(call, attempts(call, headersInTime)).pipe(
        Effect.map((response) => {
          const length = Number(response.headers["content-length"])
          // The whole download, body included, ends within HUB_GRAPH_UPLOAD_TIMEOUT of its start: a
          // body that trickles in would otherwise hold its connection and its place for good.
          const left = Duration.millis(Math.max(0, Duration.toMillis(call.timeout) - (Date.now() - startedAt)))
          const deadline = Effect.zipRight(Effect.sleep(left), Effect.fail(timedOut(call.what, call.timeout))).pipe(
            Effect.withClock(wallClock)
          )
          return {
            contentType: response.headers["content-type"] ?? "application/octet-stream",
            contentLength: Number.isInteger(length) && length >= 0 && response.headers["content-length"] !== undefined
              ? length
              : undefined,
            body: Stream.mapError(
              response.stream,
              (e) => noAnswer("network", `The media download broke off: ${describeHttpError(e)}`)
            ).pipe(
              Stream.interruptWhen(deadline)
            )
          }
        })
      )
    },
    createTemplate: (target, body) =>
      json(postJson(target, "createTemplate", [target.wabaId, "message_templates"], body)),
    listTemplates: (target, query) => json(get(target, "listTemplates", [target.wabaId, "message_templates"], query)),
    getTemplate: (target, templateId) => json(get(target, "getTemplate", [templateId])),
    getSettings: (target, includeSipCredentials) =>
      json(
        get(target, "getSettings", [target.phoneNumberId, "settings"], {
          include_sip_credentials: String(includeSipCredentials)
        })
      ),
    updateSettings: (target, body) =>
      json(postJson(target, "updateSettings", [target.phoneNumberId, "settings"], body)),
    listPhoneNumbers: (target, query) => json(get(target, "listPhoneNumbers", [target.wabaId, "phone_numbers"], query)),
    callAction: (target, body) => json(postJson(target, "callAction", [target.phoneNumberId, "calls"], body)),
    listActivities: (target, query) => json(get(target, "listActivities", [target.wabaId, "activities"], query)),
    getComplianceInfo: (target) =>
      json(get(target, "getComplianceInfo", [target.phoneNumberId, "business_compliance_info"])),
    listQrCodes: (target, query) => json(get(target, "listQrCodes", [target.phoneNumberId, "message_qrdls"], query)),
    getQrCode: (target, code, query) =>
      json(get(target, "getQrCode", [target.phoneNumberId, "message_qrdls", code], query)),
    listFlows: (target, query) => json(get(target, "listFlows", [target.wabaId, "flows"], query)),
    listFlowAssets: (target, flowId) => json(get(target, "listFlowAssets", [flowId, "assets"])),
    uploadFlowAsset: (target, flowId, asset) => {
      const fields = [
        { name: "messaging_product", value: "whatsapp" },
        { name: "name", value: asset.name },
        { name: "asset_type", value: asset.assetType },
        filePart(asset.file)
      ]
      return json(postForm(target, "uploadFlowAsset", [flowId, "assets"], fields))
    },
    deprecateFlow: (target, flowId) => json(postAction(target, "deprecateFlow", [flowId, "deprecate"])),
    getGroup: (target, groupId) => json(get(target, "getGroup", [groupId])),
    listGroups: (target, query) => json(get(target, "listGroups", [target.phoneNumberId, "groups"], query)),
    getBusinessProfile: (target, query) =>
      json(get(target, "getBusinessProfile", [target.phoneNumberId, "whatsapp_business_profile"], query)),
    blockUsers: (target, body) => json(postJson(target, "blockUsers", [target.phoneNumberId, "block_users"], body)),
    unblockUsers: (target, body) =>
      json(postJson(target, "unblockUsers", [target.phoneNumberId, "block_users"], body, "DELETE")),
    listBlockedUsers: (target, query) =>
      json(get(target, "listBlockedUsers", [target.phoneNumberId, "block_users"], query))
  })
})

/** GraphUpstream: the send over our own kept-alive client, every other call over @effect/platform's fetch client. */
export const GraphUpstream = Layer.scoped(Upstream, makeGraphUpstream).pipe(Layer.provide(FetchHttpClient.layer))

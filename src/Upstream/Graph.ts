/**
 * GraphUpstream: the real WhatsApp Business Cloud API (Graph) over @effect/platform HttpClient (the
 * lean fetch client of FetchClient.ts, whose deadline covers the whole exchange without a timer fiber).
 * Every call gets a total timeout; reads (GETs) are retried on 5xx, throttling and network errors,
 * while calls that may have changed something upstream (sends, uploads, creates, updates) never are.
 */
import { type HttpClient, HttpClientRequest, type HttpClientResponse } from "@effect/platform"
import type { HttpClientError } from "@effect/platform/HttpClientError"
import { Clock, Duration, Effect, Layer, Redacted, Schedule, Schema, Stream } from "effect"
import { graphVersionOf, warnAboutGraphVersion } from "./GraphVersion.js"
import { HubConfig } from "../Config.js"
import { type GraphRecorder, Metrics } from "../Metrics/Metrics.js"
import { makeKeepAlivePool } from "../Net/Pool.js"
import { isTimeout, makeFetchClient } from "./FetchClient.js"
import { usesProxy } from "./PooledClient.js"
import { parseJsonObject } from "../Domain/Json.js"
import { type MultipartField, multipartBody } from "./Multipart.js"
import { type GraphQuery, type JsonObject, type MediaInfo, Upstream, type UploadFile, type UpstreamTarget } from "./Upstream.js"
import { decodeGraphError, graphOutcomeOf, malformed, USER_AGENT } from "./GraphAnswer.js"
import { makeGraphSend } from "./GraphSend.js"
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

/** An HttpClient and the deadline it enforces on each exchange (answer and body). */
interface Deadlined {
  readonly client: HttpClient.HttpClient
  readonly timeout: Duration.Duration
}

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
  readonly via: Deadlined
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
  return url.protocol === "https:" && url.username === "" && META_MEDIA_HOSTS.some((host) => url.hostname === host || url.hostname.endsWith(`.${host}`))
}

export const makeGraphUpstream = Effect.gen(function*() {
  const config = yield* HubConfig
  const metrics = yield* Metrics
  yield* warnAboutGraphVersion(config.graphUrl)
  // Calls go over kept-alive connections (PooledClient.ts), as many as are in flight at once, unless
  // a proxy is configured: fetch honours it, the pool connects directly.
  const pool = usesProxy(process.env)
    ? undefined
    : yield* Effect.acquireRelease(Effect.sync(() => makeKeepAlivePool({ maxIdlePerOrigin: 1024, maxPerOrigin: config.maxConnectionsPerOrigin })), (p) => Effect.sync(() => p.close()))
  const calls: Deadlined = { client: makeFetchClient({ timeout: config.graphTimeout, ...(pool === undefined ? {} : { pool }) }), timeout: config.graphTimeout }
  const uploads: Deadlined = { client: makeFetchClient({ timeout: config.graphUploadTimeout }), timeout: config.graphUploadTimeout }
  // Downloads get their answer within the upload deadline, and their whole body too (downloadMedia).
  const downloads = makeFetchClient()
  // Network deadlines and retry delays are wall-clock time, even where a test replaced the Clock.
  const wallClock = Clock.make()
  const retrySchedule = Schedule.exponential(config.graphRetryBase).pipe(Schedule.jittered, Schedule.intersect(Schedule.recurs(2)))

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
    request: authorized(target, HttpClientRequest.get(url(...path)).pipe(withQuery(query), HttpClientRequest.acceptJson)),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: true,
    via: calls
  })

  /** A POST, or another method that changes something (DELETE), with a JSON body. */
  const postJson = (target: UpstreamTarget, call: GraphCall, path: ReadonlyArray<string>, body: JsonObject, method: "POST" | "DELETE" = "POST"): Call => ({
    request: authorized(target, HttpClientRequest.make(method)(url(...path)).pipe(HttpClientRequest.bodyUnsafeJson(body), HttpClientRequest.acceptJson)),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    via: calls
  })

  /** A POST without a body (actions such as deprecate). */
  const postAction = (target: UpstreamTarget, call: GraphCall, path: ReadonlyArray<string>): Call => ({
    request: authorized(target, HttpClientRequest.post(url(...path)).pipe(HttpClientRequest.acceptJson)),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    via: calls
  })

  const postForm = (target: UpstreamTarget, call: GraphCall, path: ReadonlyArray<string>, fields: ReadonlyArray<MultipartField>): Call => ({
    request: authorized(target, HttpClientRequest.post(url(...path)).pipe(HttpClientRequest.setBody(multipartBody(fields)), HttpClientRequest.acceptJson)),
    what: WHAT[call],
    recorder: metrics.graphCall(call),
    retry: false,
    via: uploads
  })

  const timedOut = (what: string, timeout: Duration.Duration) =>
    noAnswer("timeout", `The upstream did not answer ${what} within ${Duration.format(timeout)}`)

  /** A failed exchange: its deadline, or a network failure (possibly while reading the answer). */
  const failed = (call: Call, reading: boolean) => (e: HttpClientError) =>
    isTimeout(e)
      ? timedOut(call.what, call.via.timeout)
      : noAnswer("network", reading ? `The upstream connection failed while reading the answer: ${describeHttpError(e)}` : describeHttpError(e))

  const readText = (call: Call, response: HttpClientResponse.HttpClientResponse) => Effect.mapError(response.text, failed(call, true))

  // Meta serves an older or newer version than asked for when the asked one is gone or the app is
  // pinned: said once per process, from the answers' `facebook-api-version`.
  const askedVersion = graphVersionOf(config.graphUrl)
  let versionNoted = false
  const noteVersion = (response: HttpClientResponse.HttpClientResponse) => {
    const answered = response.headers["facebook-api-version"]
    if (versionNoted || answered === undefined || askedVersion === undefined || answered === askedVersion) return Effect.void
    versionNoted = true
    return Effect.logWarning(`The Graph API answers with version ${answered}, not the ${askedVersion} HUB_GRAPH_URL asks for`)
  }

  /** Sends the request and fails with the decoded Graph error unless the answer is 2xx. */
  const answer = (call: Call, client: HttpClient.HttpClient) =>
    client.execute(call.request).pipe(
      Effect.mapError(failed(call, false)),
      Effect.tap(noteVersion),
      Effect.flatMap((response) =>
        response.status < 400 ? Effect.succeed(response) : Effect.flatMap(readText(call, response), (text) =>
          Effect.fail(decodeGraphError(response.status, response.headers, text)))
      )
    )

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
      answer(call, call.via.client).pipe(
        Effect.flatMap((response) => readText(call, response)),
        Effect.flatMap((text) => {
          const body = parseJsonObject(text)
          return body === undefined ? Effect.fail(malformed(call.what)) : Effect.succeed(body)
        })
      )
    )

  const json = (call: Call): Effect.Effect<JsonObject, UpstreamError> => observed(call, unobservedJson(call))

  /** The body itself (extra fields kept), once it has the fields the caller relies on. */
  const checked = <A>(call: Call, is: (u: unknown) => u is A): Effect.Effect<A, UpstreamError> =>
    observed(call, Effect.flatMap(unobservedJson(call), (body) => (is(body) ? Effect.succeed(body) : Effect.fail(malformed(call.what)))))

  const filePart = (file: UploadFile): MultipartField => ({ name: "file", filename: file.filename, contentType: file.mimeType, content: file.content })

  return Upstream.of({
    sendMessage: makeGraphSend({ graphUrl: config.graphUrl, timeout: config.graphTimeout, pool, recorder: metrics.graphCall("sendMessage") }),
    uploadMedia: (target, file) => {
      const fields = [{ name: "messaging_product", value: "whatsapp" }, { name: "type", value: file.mimeType }, filePart(file)]
      return checked(postForm(target, "uploadMedia", [target.phoneNumberId, "media"], fields), isUploadResponse)
    },
    getMedia: (target, mediaId) =>
      checked<MediaInfo>(get(target, "getMedia", [mediaId], { phone_number_id: target.phoneNumberId }), isMediaInfo),
    downloadMedia: (target, mediaUrl) => {
      // The instance's access token goes only where Meta serves media, whatever URL the Graph answered.
      if (!isMediaHost(mediaUrl, config.graphUrl)) {
        return Effect.fail(noAnswer("network", "The upstream answered a media URL that is not on Meta's media hosts; it was not fetched"))
      }
      const call: Call = {
        request: authorized(target, HttpClientRequest.get(mediaUrl)),
        what: WHAT.downloadMedia,
        recorder: metrics.graphCall("downloadMedia"),
        retry: true,
        via: uploads
      }
      const headersInTime = Effect.timeoutFail(answer(call, downloads), {
        duration: call.via.timeout,
        onTimeout: () => timedOut(call.what, call.via.timeout)
      })
      const startedAt = Date.now()
      return observed(call, attempts(call, headersInTime)).pipe(
        Effect.map((response) => {
          const length = Number(response.headers["content-length"])
          // The whole download, body included, ends within HUB_GRAPH_UPLOAD_TIMEOUT of its start: a
          // body that trickles in would otherwise hold its connection and its place for good.
          const left = Duration.millis(Math.max(0, Duration.toMillis(call.via.timeout) - (Date.now() - startedAt)))
          const deadline = Effect.zipRight(Effect.sleep(left), Effect.fail(timedOut(call.what, call.via.timeout))).pipe(Effect.withClock(wallClock))
          return {
            contentType: response.headers["content-type"] ?? "application/octet-stream",
            contentLength: Number.isInteger(length) && length >= 0 && response.headers["content-length"] !== undefined ? length : undefined,
            body: Stream.mapError(response.stream, (e) => noAnswer("network", `The media download broke off: ${describeHttpError(e)}`)).pipe(
              Stream.interruptWhen(deadline)
            )
          }
        })
      )
    },
    createTemplate: (target, body) => json(postJson(target, "createTemplate", [target.wabaId, "message_templates"], body)),
    listTemplates: (target, query) => json(get(target, "listTemplates", [target.wabaId, "message_templates"], query)),
    getTemplate: (target, templateId) => json(get(target, "getTemplate", [templateId])),
    getSettings: (target, includeSipCredentials) =>
      json(get(target, "getSettings", [target.phoneNumberId, "settings"], { include_sip_credentials: String(includeSipCredentials) })),
    updateSettings: (target, body) => json(postJson(target, "updateSettings", [target.phoneNumberId, "settings"], body)),
    listPhoneNumbers: (target, query) => json(get(target, "listPhoneNumbers", [target.wabaId, "phone_numbers"], query)),
    callAction: (target, body) => json(postJson(target, "callAction", [target.phoneNumberId, "calls"], body)),
    listActivities: (target, query) => json(get(target, "listActivities", [target.wabaId, "activities"], query)),
    getComplianceInfo: (target) => json(get(target, "getComplianceInfo", [target.phoneNumberId, "business_compliance_info"])),
    listQrCodes: (target, query) => json(get(target, "listQrCodes", [target.phoneNumberId, "message_qrdls"], query)),
    getQrCode: (target, code, query) => json(get(target, "getQrCode", [target.phoneNumberId, "message_qrdls", code], query)),
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
    getBusinessProfile: (target, query) => json(get(target, "getBusinessProfile", [target.phoneNumberId, "whatsapp_business_profile"], query)),
    blockUsers: (target, body) => json(postJson(target, "blockUsers", [target.phoneNumberId, "block_users"], body)),
    unblockUsers: (target, body) => json(postJson(target, "unblockUsers", [target.phoneNumberId, "block_users"], body, "DELETE")),
    listBlockedUsers: (target, query) => json(get(target, "listBlockedUsers", [target.phoneNumberId, "block_users"], query))
  })
})

/** GraphUpstream over its own clients: kept-alive calls, and fetch for uploads and downloads. */
export const GraphUpstream = Layer.scoped(Upstream, makeGraphUpstream)

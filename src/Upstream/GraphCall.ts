/**
 * A Graph call other than the send (GraphSend.ts), as GraphExchange.ts makes it: its request, with the
 * instance's token, and how it is made (retried or not, its timeout, under the connection cap or not).
 */
import { HttpClientRequest } from "@effect/platform"
import { type Duration, Redacted } from "effect"
import type { HubSettings } from "../Config.js"
import type { JsonObject } from "../Domain/Json.js"
import type { GraphRecorder, HubMetrics } from "../Metrics/Metrics.js"
import { USER_AGENT } from "./GraphAnswer.js"
import { multipartBody, type MultipartField } from "./Multipart.js"
import type { GraphQuery, UploadFile, Upstream, UpstreamTarget } from "./Upstream.js"

/** Each Graph call but the send (GraphSend.ts), named as the Upstream method that makes it (the metrics' call label). */
export type GraphCall = Exclude<keyof Upstream["Type"], "sendMessage">

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
  getPhoneNumber: "the phone number read",
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

export interface Call {
  /** Which call it is: its span's name (`Graph.<name>`). */
  readonly name: GraphCall
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

/** What calls are built from: where the Graph is, how long a call may take, where calls are recorded. */
export interface CallSettings extends Pick<HubSettings, "graphUrl" | "graphTimeout" | "graphUploadTimeout"> {
  readonly metrics: HubMetrics
}

const graphUrlOf = (settings: CallSettings, path: ReadonlyArray<string>) =>
  `${settings.graphUrl}/${path.map(encodeURIComponent).join("/")}`

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

/** A read: retried on transient failures, under the cap. */
export const getCall = (
  settings: CallSettings,
  target: UpstreamTarget,
  call: GraphCall,
  path: ReadonlyArray<string>,
  query: GraphQuery = {}
): Call => ({
  request: authorized(
    target,
    HttpClientRequest.get(graphUrlOf(settings, path)).pipe(withQuery(query), HttpClientRequest.acceptJson)
  ),
  name: call,
  what: WHAT[call],
  recorder: settings.metrics.graphCall(call),
  retry: true,
  timeout: settings.graphTimeout,
  capped: true
})

/** A POST, or another method that changes something (DELETE), with a JSON body. */
export const postJsonCall = (
  settings: CallSettings,
  target: UpstreamTarget,
  call: GraphCall,
  path: ReadonlyArray<string>,
  body: JsonObject,
  method: "POST" | "DELETE" = "POST"
): Call => ({
  request: authorized(
    target,
    HttpClientRequest.make(method)(graphUrlOf(settings, path)).pipe(
      HttpClientRequest.bodyUnsafeJson(body),
      HttpClientRequest.acceptJson
    )
  ),
  name: call,
  what: WHAT[call],
  recorder: settings.metrics.graphCall(call),
  retry: false,
  timeout: settings.graphTimeout,
  capped: true
})

/** A POST without a body (actions such as deprecate). */
export const postActionCall = (
  settings: CallSettings,
  target: UpstreamTarget,
  call: GraphCall,
  path: ReadonlyArray<string>
): Call => ({
  request: authorized(target, HttpClientRequest.post(graphUrlOf(settings, path)).pipe(HttpClientRequest.acceptJson)),
  name: call,
  what: WHAT[call],
  recorder: settings.metrics.graphCall(call),
  retry: false,
  timeout: settings.graphTimeout,
  capped: true
})

/** An upload (multipart): within the upload timeout, and outside the cap. */
export const postFormCall = (
  settings: CallSettings,
  target: UpstreamTarget,
  call: GraphCall,
  path: ReadonlyArray<string>,
  fields: ReadonlyArray<MultipartField>
): Call => ({
  request: authorized(
    target,
    HttpClientRequest.post(graphUrlOf(settings, path)).pipe(
      HttpClientRequest.setBody(multipartBody(fields)),
      HttpClientRequest.acceptJson
    )
  ),
  name: call,
  what: WHAT[call],
  recorder: settings.metrics.graphCall(call),
  retry: false,
  timeout: settings.graphUploadTimeout,
  capped: false
})

/** A media download from the URL the Graph answered: a read, within the upload timeout, outside the cap. */
export const mediaDownloadCall = (settings: CallSettings, target: UpstreamTarget, mediaUrl: string): Call => ({
  request: authorized(target, HttpClientRequest.get(mediaUrl)),
  name: "downloadMedia",
  what: WHAT.downloadMedia,
  recorder: settings.metrics.graphCall("downloadMedia"),
  retry: true,
  timeout: settings.graphUploadTimeout,
  capped: false
})

/** An upload's file, as the form's `file` part. */
export const filePart = (file: UploadFile): MultipartField => ({
  name: "file",
  filename: file.filename,
  contentType: file.mimeType,
  content: file.content
})

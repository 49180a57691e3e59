/**
 * GraphUpstream: the real WhatsApp Business Cloud API (Graph). The send, on every send's path, goes
 * over our own kept-alive client (GraphSend.ts, src/Net/Pool.ts); every other call is cold and goes
 * through @effect/platform's HttpClient over fetch (FetchHttpClient). Every call gets a total timeout,
 * its answer's body included, and the hub reads at most 16 MB of an answer (GRAPH_ANSWER_LIMIT).
 * Reads (GETs) are retried on 5xx, throttling and network errors, while calls that may have changed
 * something upstream (sends, uploads, creates, updates) never are. Calls other than uploads and
 * downloads count against HUB_MAX_CONNECTIONS_PER_ORIGIN together with the send's connections.
 * Here: which call goes where; the calls are built in GraphCall.ts, made in GraphExchange.ts, and the
 * media calls are in GraphMedia.ts.
 */
import { FetchHttpClient, HttpClient } from "@effect/platform"
import { Effect, Layer } from "effect"
import { HubConfig } from "../Config.js"
import { Metrics } from "../Metrics/Metrics.js"
import { makeKeepAlivePool } from "../Net/Pool.js"
import { HubTracer } from "../Tracing/Spans.js"
import { type CallSettings, filePart, getCall, postActionCall, postFormCall, postJsonCall } from "./GraphCall.js"
import { type GraphClient, json, makeGraphClient } from "./GraphExchange.js"
import { downloadMedia, getMedia, uploadMedia } from "./GraphMedia.js"
import { makeGraphSend, usesProxy } from "./GraphSend.js"
import { warnAboutGraphVersion } from "./GraphVersion.js"
import { Upstream } from "./Upstream.js"

/** Every call but the send, each to its path. */
const graphCalls = (settings: CallSettings, client: GraphClient): Omit<Upstream["Type"], "sendMessage"> => ({
  uploadMedia: (target, file) => uploadMedia(settings, client, target, file),
  getMedia: (target, mediaId) => getMedia(settings, client, target, mediaId),
  downloadMedia: (target, mediaUrl) => downloadMedia(settings, client, target, mediaUrl),
  createTemplate: (target, body) =>
    json(client, postJsonCall(settings, target, "createTemplate", [target.wabaId, "message_templates"], body)),
  listTemplates: (target, query) =>
    json(client, getCall(settings, target, "listTemplates", [target.wabaId, "message_templates"], query)),
  getTemplate: (target, templateId) => json(client, getCall(settings, target, "getTemplate", [templateId])),
  getSettings: (target, includeSipCredentials) =>
    json(
      client,
      getCall(settings, target, "getSettings", [target.phoneNumberId, "settings"], {
        include_sip_credentials: String(includeSipCredentials)
      })
    ),
  updateSettings: (target, body) =>
    json(client, postJsonCall(settings, target, "updateSettings", [target.phoneNumberId, "settings"], body)),
  listPhoneNumbers: (target, query) =>
    json(client, getCall(settings, target, "listPhoneNumbers", [target.wabaId, "phone_numbers"], query)),
  callAction: (target, body) =>
    json(client, postJsonCall(settings, target, "callAction", [target.phoneNumberId, "calls"], body)),
  listActivities: (target, query) =>
    json(client, getCall(settings, target, "listActivities", [target.wabaId, "activities"], query)),
  getPhoneNumber: (target, query) =>
    json(client, getCall(settings, target, "getPhoneNumber", [target.phoneNumberId], query)),
  getComplianceInfo: (target) =>
    json(client, getCall(settings, target, "getComplianceInfo", [target.phoneNumberId, "business_compliance_info"])),
  listQrCodes: (target, query) =>
    json(client, getCall(settings, target, "listQrCodes", [target.phoneNumberId, "message_qrdls"], query)),
  getQrCode: (target, code, query) =>
    json(client, getCall(settings, target, "getQrCode", [target.phoneNumberId, "message_qrdls", code], query)),
  listFlows: (target, query) => json(client, getCall(settings, target, "listFlows", [target.wabaId, "flows"], query)),
  listFlowAssets: (target, flowId) => json(client, getCall(settings, target, "listFlowAssets", [flowId, "assets"])),
  uploadFlowAsset: (target, flowId, asset) => {
    const fields = [
      { name: "messaging_product", value: "whatsapp" },
      { name: "name", value: asset.name },
      { name: "asset_type", value: asset.assetType },
      filePart(asset.file)
    ]
    return json(client, postFormCall(settings, target, "uploadFlowAsset", [flowId, "assets"], fields))
  },
  deprecateFlow: (target, flowId) =>
    json(client, postActionCall(settings, target, "deprecateFlow", [flowId, "deprecate"])),
  getGroup: (target, groupId) => json(client, getCall(settings, target, "getGroup", [groupId])),
  listGroups: (target, query) =>
    json(client, getCall(settings, target, "listGroups", [target.phoneNumberId, "groups"], query)),
  getBusinessProfile: (target, query) =>
    json(
      client,
      getCall(settings, target, "getBusinessProfile", [target.phoneNumberId, "whatsapp_business_profile"], query)
    ),
  blockUsers: (target, body) =>
    json(client, postJsonCall(settings, target, "blockUsers", [target.phoneNumberId, "block_users"], body)),
  unblockUsers: (target, body) =>
    json(
      client,
      postJsonCall(settings, target, "unblockUsers", [target.phoneNumberId, "block_users"], body, "DELETE")
    ),
  listBlockedUsers: (target, query) =>
    json(client, getCall(settings, target, "listBlockedUsers", [target.phoneNumberId, "block_users"], query))
})

const makeGraphUpstream = Effect.gen(function*() {
  const config = yield* HubConfig
  const metrics = yield* Metrics
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
  const client = makeGraphClient({
    http: yield* HttpClient.HttpClient,
    pool,
    graphUrl: config.graphUrl,
    retryBase: config.graphRetryBase
  })
  const settings: CallSettings = {
    graphUrl: config.graphUrl,
    graphTimeout: config.graphTimeout,
    graphUploadTimeout: config.graphUploadTimeout,
    metrics
  }
  return Upstream.of({
    sendMessage: makeGraphSend({
      graphUrl: config.graphUrl,
      timeout: config.graphTimeout,
      pool,
      recorder: metrics.graphCall("sendMessage"),
      tracer: yield* HubTracer
    }),
    ...graphCalls(settings, client)
  })
})

/** GraphUpstream: the send over our own kept-alive client, every other call over @effect/platform's fetch client. */
export const GraphUpstream = Layer.scoped(Upstream, makeGraphUpstream).pipe(Layer.provide(FetchHttpClient.layer))

/**
 * The upstream (WhatsApp Business Cloud API, a Graph API): one method per call the hub makes.
 * Two layers implement it: GraphUpstream (real HTTP) and SandboxUpstream (in-process simulator).
 * Bodies the spec passes through are typed as JSON objects; the hub validates its own inputs
 * before calling and does not re-validate what the upstream answers beyond what it reads.
 */
import { Context, type Effect, type Either, type Redacted, type Stream, type Tracer } from "effect"
import type { JsonObject } from "../Domain/Json.js"
import type { UpstreamError } from "./UpstreamError.js"

/** Which business number and account a call acts for, with that instance's access token. */
export interface UpstreamTarget {
  readonly phoneNumberId: string
  readonly wabaId: string
  readonly accessToken: Redacted.Redacted<string>
}

/** Graph cursor paging query (`limit`, `after`, `before`, `fields`) plus call-specific filters. */
export type GraphQuery = Readonly<Record<string, string | undefined>>

/** The Graph endpoint a send goes through: `/messages`, or the Marketing Messages API's `/marketing_messages` (MARKETING templates). */
export const sendEndpoints = ["messages", "marketing_messages"] as const
export type SendEndpoint = (typeof sendEndpoints)[number]

export interface SendMessageResponse {
  readonly messaging_product: string
  /** wa_id when the number is known; a send to a business-scoped user id is answered with its user_id. */
  readonly contacts: ReadonlyArray<{ readonly input: string; readonly wa_id?: string | undefined }>
  readonly messages: ReadonlyArray<{ readonly id: string; readonly message_status?: string }>
}

/** A file sent upstream as one multipart part; a Blob (for example a Bun.file of the upload's temp file) is not read into memory first. */
export interface UploadFile {
  readonly filename: string
  readonly mimeType: string
  readonly size: number
  readonly content: Blob
}

export interface MediaInfo {
  readonly url: string
  readonly mime_type: string
  readonly sha256: string
  /** Graph sends a string or a number; callers normalise. */
  readonly file_size: number | string
  readonly id: string
}

export interface MediaDownload {
  readonly contentType: string
  readonly contentLength: number | undefined
  readonly body: Stream.Stream<Uint8Array, UpstreamError>
}

export class Upstream extends Context.Tag("Upstream")<Upstream, {
  /**
   * POST /{phone-number-id}/messages, or /marketing_messages (the Marketing Messages API, which takes
   * the same body and answers the same way). Never retried: a send may have reached the upstream. A
   * plain promise of the outcome (its refusal on the left), not an effect: it is on every send's path,
   * which runs without a fiber (see Messages/Send.ts).
   */
  readonly sendMessage: (
    target: UpstreamTarget,
    body: JsonObject,
    endpoint?: SendEndpoint,
    /** The send's span when tracing: the Graph call's span is its child. */
    parent?: Tracer.AnySpan
  ) => Promise<Either.Either<SendMessageResponse, UpstreamError>>
  /** POST /{phone-number-id}/media (multipart: file, type, messaging_product). */
  readonly uploadMedia: (
    target: UpstreamTarget,
    file: UploadFile
  ) => Effect.Effect<{ readonly id: string }, UpstreamError>
  /** GET /{media-id}?phone_number_id=… */
  readonly getMedia: (target: UpstreamTarget, mediaId: string) => Effect.Effect<MediaInfo, UpstreamError>
  /** GET <media url> with the instance's Bearer token. */
  readonly downloadMedia: (target: UpstreamTarget, url: string) => Effect.Effect<MediaDownload, UpstreamError>
  /** POST /{waba-id}/message_templates */
  readonly createTemplate: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{waba-id}/message_templates */
  readonly listTemplates: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{template-id} */
  readonly getTemplate: (target: UpstreamTarget, templateId: string) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/settings?include_sip_credentials= */
  readonly getSettings: (
    target: UpstreamTarget,
    includeSipCredentials: boolean
  ) => Effect.Effect<JsonObject, UpstreamError>
  /** POST /{phone-number-id}/settings with exactly one feature section. */
  readonly updateSettings: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}?fields=… (the number's throughput level, among others) */
  readonly getPhoneNumber: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{waba-id}/phone_numbers */
  readonly listPhoneNumbers: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** POST /{phone-number-id}/calls (the hub adds messaging_product and action). */
  readonly callAction: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{waba-id}/activities */
  readonly listActivities: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/business_compliance_info */
  readonly getComplianceInfo: (target: UpstreamTarget) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/message_qrdls */
  readonly listQrCodes: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/message_qrdls/{code}: Graph wraps the one code in `data[]`. */
  readonly getQrCode: (
    target: UpstreamTarget,
    code: string,
    query: GraphQuery
  ) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{waba-id}/flows */
  readonly listFlows: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{flow-id}/assets */
  readonly listFlowAssets: (target: UpstreamTarget, flowId: string) => Effect.Effect<JsonObject, UpstreamError>
  /** POST /{flow-id}/assets (multipart: file, name, asset_type). */
  readonly uploadFlowAsset: (
    target: UpstreamTarget,
    flowId: string,
    asset: { readonly name: string; readonly assetType: "FLOW_JSON" | "IMAGE"; readonly file: UploadFile }
  ) => Effect.Effect<JsonObject, UpstreamError>
  /** POST /{flow-id}/deprecate */
  readonly deprecateFlow: (target: UpstreamTarget, flowId: string) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{group-id} */
  readonly getGroup: (target: UpstreamTarget, groupId: string) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/groups: the number's active groups, paged. */
  readonly listGroups: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/whatsapp_business_profile */
  readonly getBusinessProfile: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
  /**
   * POST /{phone-number-id}/block_users `{messaging_product, block_users: [{user} | {user_id}]}`. Some
   * users refused is Graph error 139100, whose `answer` lists each user taken and refused.
   */
  readonly blockUsers: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>
  /** DELETE /{phone-number-id}/block_users, the body and a partial failure as blockUsers'. */
  readonly unblockUsers: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>
  /** GET /{phone-number-id}/block_users: the number's blocked users, paged (`limit`, `after`, `before`). */
  readonly listBlockedUsers: (target: UpstreamTarget, query: GraphQuery) => Effect.Effect<JsonObject, UpstreamError>
}>() {}

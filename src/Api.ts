/** HubApi: every endpoint group of the hub, composed, and the OpenAPI document's own fields. */
import { HttpApi, OpenApi } from "@effect/platform"
import packageJson from "../package.json" with { type: "json" }
import { AnalyticsApi } from "./Analytics/Api.js"
import { AuthApi } from "./ApiTokens/Api.js"
import { BlockUsersApi } from "./BlockUsers/Api.js"
import { BroadcastsApi } from "./Broadcasts/Api.js"
import { BusinessProfileApi } from "./BusinessProfile/Api.js"
import { CallsApi } from "./Calls/Api.js"
import { Wire } from "./Domain/Errors.js"
import { isRecord } from "./Domain/Json.js"
import { FlowsApi } from "./Flows/Api.js"
import { GroupsApi } from "./Groups/Api.js"
import { HealthApi } from "./Health/Api.js"
import { InstancesApi } from "./Instances/Api.js"
import { LiveEventsApi } from "./LiveEvents/Api.js"
import { MediaApi } from "./Media/Api.js"
import { MessagesApi } from "./Messages/Api.js"
import { MetricsApi } from "./Metrics/Api.js"
import { PhoneNumbersApi } from "./PhoneNumbers/Api.js"
import { PollApi } from "./Poll/Api.js"
import { QrCodesApi } from "./QrCodes/Api.js"
import { ReplaysApi } from "./Replays/Api.js"
import { SandboxApi } from "./Sandbox/Api.js"
import { SendQueueApi } from "./SendQueue/Api.js"
import { StatsApi } from "./Stats/Api.js"
import { TemplatesApi } from "./Templates/Api.js"
import { UpstreamEventsApi } from "./UpstreamEvents/Api.js"
import { WebhooksApi } from "./Webhooks/Api.js"

const DESCRIPTION = [
  "HTTP gateway in front of the WhatsApp Business Cloud API.",
  "Authenticate with `Authorization: Bearer <token>`: an organization token (all instances of an organization), an " +
  "instance token (one instance), or a session token (from `hub session create`; manages api tokens). Each operation " +
  "says which kinds it accepts.",
  "Every error answer is an ErrorBody `{statusCode, message, error?, details?}`; a 429 carries `Retry-After`."
].join("\n\n")

const ERROR_BODY = "#/components/schemas/ErrorBody"
/** HttpApi declares its own decode error on every endpoint; the edge answers it as an ErrorBody 400 (validation_failed). */
const DECODE_ERROR = "#/components/schemas/HttpApiDecodeError"
const DECODE_ERROR_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const retryAfterHeader = {
  "Retry-After": {
    description: "Seconds to wait before retrying",
    required: true,
    schema: { type: "integer", minimum: 1 }
  }
}

/** An error answer's schema member: ErrorBody (with the error's description, if any), or HttpApi's decode error. */
const errorMember = (member: unknown): { readonly description: string | undefined } | undefined => {
  if (!isRecord(member)) return undefined
  if (member.$ref === ERROR_BODY || member.$ref === DECODE_ERROR) return { description: undefined }
  const [only, ...others] = Array.isArray(member.allOf) ? member.allOf : []
  return isRecord(only) && only.$ref === ERROR_BODY && others.length === 0
    ? { description: typeof member.description === "string" ? member.description : undefined }
    : undefined
}

/**
 * Effect marks its `never` and `unknown` schemas with `$id: "/schemas/never"` (and so on) wherever
 * they occur; one id on many schemas is invalid JSON Schema, and validators refuse to resolve it.
 */
const withoutSchemaIds = (node: unknown): void => {
  if (Array.isArray(node)) return node.forEach(withoutSchemaIds)
  if (!isRecord(node)) return
  if (typeof node.$id === "string" && node.$id.startsWith("/schemas/")) delete node.$id
  Object.values(node).forEach(withoutSchemaIds)
}

/**
 * The error answers as the wire has them. Each status's errors are one ErrorBody (the schemas in
 * Domain/Errors.ts encode to it); HttpApi lists them as a union, each with its own description, and
 * adds its decode error, which the edge answers as an ErrorBody too. So each error response becomes
 * one ErrorBody described by all of its errors, and every 429 gets its Retry-After header (schemas
 * describe bodies only). Also drops Effect's schema ids (see withoutSchemaIds).
 */
const errorResponses = <Spec extends object>(spec: Spec): Spec => {
  const paths = "paths" in spec && isRecord(spec.paths) ? Object.values(spec.paths) : []
  for (const operation of paths.filter(isRecord).flatMap((item) => Object.values(item))) {
    const responses = isRecord(operation) && isRecord(operation.responses) ? operation.responses : {}
    for (const [status, response] of Object.entries(responses)) {
      if (!isRecord(response) || Number(status) < 400) continue
      const media = isRecord(response.content) ? response.content["application/json"] : undefined
      const schema = isRecord(media) ? media.schema : undefined
      const members = (isRecord(schema) && Array.isArray(schema.anyOf) ? schema.anyOf : [schema]).map(errorMember)
      if (!isRecord(media) || members.some((member) => member === undefined)) continue
      const descriptions = members.flatMap((member) => member?.description === undefined ? [] : [member.description])
      media.schema = { $ref: ERROR_BODY }
      if (descriptions.length > 0) response.description = descriptions.join(" Or: ")
      if (status === "429") response.headers = retryAfterHeader
    }
  }
  withoutSchemaIds(spec)
  const components = "components" in spec && isRecord(spec.components) && isRecord(spec.components.schemas)
    ? spec.components.schemas
    : {}
  if (!JSON.stringify(paths).includes(DECODE_ERROR)) {
    for (const name of DECODE_ERROR_SCHEMAS) {
      delete components[name]
    }
  }
  return spec
}

export class HubApi extends HttpApi.make("hub")
  .add(HealthApi)
  .add(AuthApi)
  .add(InstancesApi)
  .add(MessagesApi)
  .add(BroadcastsApi)
  .add(SendQueueApi)
  .add(StatsApi)
  .add(MediaApi)
  .add(TemplatesApi)
  .add(PhoneNumbersApi)
  .add(CallsApi)
  .add(AnalyticsApi)
  .add(QrCodesApi)
  .add(FlowsApi)
  .add(GroupsApi)
  .add(BusinessProfileApi)
  .add(BlockUsersApi)
  .add(WebhooksApi)
  .add(ReplaysApi)
  .add(PollApi)
  .add(UpstreamEventsApi)
  .add(SandboxApi)
  .add(LiveEventsApi)
  .add(MetricsApi)
  .addError(Wire.BadRequest)
  .addError(Wire.InternalServerError)
  .annotate(OpenApi.Title, "Messaging Hub")
  .annotate(OpenApi.Version, packageJson.version)
  .annotate(OpenApi.Description, DESCRIPTION)
  .annotate(OpenApi.Servers, [{ url: "/", description: "This hub" }])
  .annotate(OpenApi.Transform, errorResponses)
{}

/**
 * The sandbox's deterministic failure switch and its Graph-shaped errors. A value (recipient `to`,
 * object id, upload filename, or the instance's phone_number_id / WABA id) that starts with one of
 * the reserved prefixes below makes the call fail with that code. +999 is not an assigned country
 * code, so no real number collides. See the table in ../Sandbox.ts.
 */
import { Effect } from "effect"
import type { JsonObject } from "../../Domain/Json.js"
import { graphError, type UpstreamError } from "../../Upstream/UpstreamError.js"

interface Failure {
  readonly status: number
  readonly code: number
  readonly subcode?: number
  readonly message: string
  readonly details?: string
  readonly retryAfterSeconds?: number
}

const windowFailure: Failure = {
  status: 400,
  code: 131047,
  message: "(#131047) Re-engagement message",
  details:
    "Message failed to send because more than 24 hours have passed since the customer last replied to this number."
}

/** Reserved prefix → failure. No prefix is a prefix of another. */
export const RESERVED_FAILURES: Readonly<Record<string, Failure>> = {
  "999100": {
    status: 400,
    code: 100,
    message: "(#100) Invalid parameter",
    details: "Sandbox: forced invalid parameter"
  },
  "999190": { status: 401, code: 190, subcode: 463, message: "Error validating access token: Session has expired" },
  "999200": {
    status: 403,
    code: 200,
    message: "(#200) Permissions error",
    details: "Sandbox: forced permission error"
  },
  "99980007": { status: 429, code: 80007, message: "(#80007) Rate limit issues", retryAfterSeconds: 60 },
  "999130429": {
    status: 429,
    code: 130429,
    message: "(#130429) Rate limit hit",
    details: "Cloud API message throughput has been reached.",
    retryAfterSeconds: 2
  },
  "999131056": {
    status: 429,
    code: 131056,
    message: "(#131056) (Business Account, Consumer Account) pair rate limit hit",
    details:
      "Too many messages sent from the sender phone number to the same recipient phone number in a short period of time.",
    retryAfterSeconds: 6
  },
  "999131057": {
    status: 400,
    code: 131057,
    message: "(#131057) Account in maintenance mode",
    details: "Business account is in maintenance mode while its throughput is upgraded."
  },
  "999131062": {
    status: 400,
    code: 131062,
    message: "(#131062) Business-scoped user ID recipients are not supported for this message",
    details: "Authentication messages need the recipient's phone number."
  },
  "999131030": {
    status: 400,
    code: 131030,
    message: "(#131030) Recipient phone number not in allowed list",
    details: "Recipient phone number not in allowed list: Add recipient phone number to recipient list and try again."
  },
  "999131047": windowFailure,
  "999132001": {
    status: 404,
    code: 132001,
    subcode: 2494073,
    message: "(#132001) Template name does not exist in the translation",
    details: "Sandbox: forced template error"
  },
  "999138006": {
    status: 400,
    code: 138006,
    message: "(#138006) No approved call permission from the recipient",
    details: "The user has not granted the business permission to call."
  },
  "999500": {
    status: 500,
    code: 131000,
    message: "(#131000) Something went wrong",
    details: "Sandbox: forced transient error"
  },
  "999503": { status: 503, code: 2, message: "(#2) Service temporarily unavailable" }
}

/** Recipients with this prefix have a closed 24 h window, reported asynchronously by a failed status. */
export const ASYNC_WINDOW_PREFIX = "999231047"
/** Recipients with this prefix have a closed 24 h window, refused synchronously (free-form messages only). */
export const SYNC_WINDOW_PREFIX = "999131047"

const traceId = () => {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
  return Array.from({ length: 23 }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join("")
}

const toError = (f: Failure): UpstreamError =>
  graphError({
    status: f.status,
    code: f.code,
    subcode: f.subcode,
    message: f.message,
    fbtraceId: traceId(),
    details: f.details,
    retryAfterSeconds: f.retryAfterSeconds
  })

const digitsOf = (value: string) => value.replace(/^\+/, "").replace(/^wacid\./, "")

/** The forced failure for a value, if it carries a reserved prefix. */
const reservedFailure = (value: string | undefined): UpstreamError | undefined => {
  if (value === undefined) return undefined
  const v = digitsOf(value)
  for (const [prefix, failure] of Object.entries(RESERVED_FAILURES)) {
    if (v.startsWith(prefix)) return toError(failure)
  }
  return undefined
}

/** Fails with the first forced failure among the values (the 131047 window rule is applied by sends only). */
export const checkReserved = (...values: ReadonlyArray<string | undefined>): Effect.Effect<void, UpstreamError> => {
  for (const value of values) {
    if (value !== undefined && digitsOf(value).startsWith(SYNC_WINDOW_PREFIX)) continue
    const failure = reservedFailure(value)
    if (failure !== undefined) return Effect.fail(failure)
  }
  return Effect.void
}

export const windowClosed = (): UpstreamError => toError(windowFailure)

/** The error object a failed status event carries for a closed window. */
export const windowClosedStatusError = {
  code: 131047,
  title: "Re-engagement message",
  message: "Re-engagement message",
  error_data: { details: windowFailure.details ?? "" },
  href: "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
}

/** Users (numbers or the id part of a business-scoped user id) with this prefix are refused one by one when blocked or unblocked. */
export const BLOCK_FAILURE_PREFIX = "999139100"

/** The error a refused user carries in Block Users' `failed_users`. */
export const blockUserError = {
  message: "(#139100) Failed to block/unblock users",
  code: 139100,
  error_data: { details: "Sandbox: forced block failure for this user" }
}

/**
 * Code 139100: some users were not blocked or unblocked (HTTP 400). Its answer is Graph's: the
 * outcome (`block_users`, each user taken and refused) beside the error.
 */
export const someUsersFailed = (outcome: JsonObject): UpstreamError => {
  const message = "(#139100) Failed to block/unblock users"
  const details = "Failed to block some users, see the block_users response list for details"
  const fbtraceId = traceId()
  const error = { message, type: "OAuthException", code: 139100, error_data: { details }, fbtrace_id: fbtraceId }
  return graphError({
    status: 400,
    code: 139100,
    message,
    fbtraceId,
    details,
    answer: { messaging_product: "whatsapp", block_users: outcome, error }
  })
}

/** Code 100: a parameter is missing or wrong (HTTP 400). */
export const invalidParameter = (message: string, details?: string, subcode?: number): UpstreamError =>
  graphError({ status: 400, code: 100, subcode, message: `(#100) ${message}`, fbtraceId: traceId(), details })

/** Code 100, subcode 33: the object does not exist or is not visible to this token (HTTP 400, as Graph answers). */
export const unknownObject = (id: string, method: "get" | "post" = "get"): UpstreamError =>
  graphError({
    status: 400,
    code: 100,
    subcode: 33,
    message:
      `Unsupported ${method} request. Object with ID '${id}' does not exist, cannot be loaded due to missing permissions, or does not support this operation. Please read the Graph API documentation at https://developers.facebook.com/docs/graph-api`,
    fbtraceId: traceId()
  })

/** Code 132001: no APPROVED template of that name in that language (subcode 2494073, HTTP 404). */
export const templateMissing = (name: string, language: string): UpstreamError =>
  graphError({
    status: 404,
    code: 132001,
    subcode: 2494073,
    message: "(#132001) Template name does not exist in the translation",
    fbtraceId: traceId(),
    details: `template name (${name}) does not exist in ${language}`
  })

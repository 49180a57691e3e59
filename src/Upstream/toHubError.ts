/**
 * How an upstream failure reaches the customer (DESIGN.md): Graph 4xx keeps its status (400, 403
 * or 404; any other 4xx is answered 400) and message with `details.upstream`; throttling is 429 with
 * Retry-After (and the call and group limits that mean "later"); a throughput upgrade in progress
 * (131057) is 503 with Retry-After; Graph 5xx is 502; no answer is 502 (network) or 504 (timeout). A rejected access token is the operator's problem, not the caller's,
 * so it is 502 rather than a 401 the caller would take for its own token.
 */
import { TooManyRequests, UpstreamFailure } from "../Domain/Errors.js"
import { THROTTLING_CODES, type UpstreamError } from "./UpstreamError.js"

export const upstreamDetails = (e: UpstreamError) => ({
  upstream: {
    code: e.code,
    ...(e.subcode === undefined ? {} : { error_subcode: e.subcode }),
    ...(e.fbtraceId === undefined ? {} : { fbtrace_id: e.fbtraceId }),
    ...(e.details === undefined ? {} : { details: e.details })
  }
})

/**
 * Graph error codes of 2025-26 (research/platform-2026.md §7) and the stable `error` string each is
 * answered with, so callers can act on them without parsing messages; all keep `details.upstream`.
 */
const REFUSALS: ReadonlyArray<readonly [from: number, to: number, error: string]> = [
  [131062, 131062, "recipient_needs_phone_number"], // a business-scoped user id cannot receive this (authentication)
  [131063, 131063, "marketing_disabled_on_cloud_api"], // send it through the Marketing Messages API
  [131064, 131064, "messaging_limit_reached"], // template-classification violations, Direct Send too
  [137000, 137000, "identity_key_mismatch"], // recipient_identity_key_hash no longer matches
  [138000, 138018, "calling_refused"],
  [139100, 139103, "block_users_failed"],
  [131200, 131215, "groups_refused"],
  [147001, 147005, "username_refused"]
]

/** Codes that mean "later", not "no": the call or group rate and concurrency limits. */
const RETRY_LATER: ReadonlySet<number> = new Set([138002, 138005, 138009, 131208])

/** The upstream is in maintenance for about a minute while a number's throughput is upgraded. */
const MAINTENANCE = 131057

const refusalErrorOf = (code: number): string =>
  REFUSALS.find(([from, to]) => code >= from && code <= to)?.[2] ?? "upstream_error"

export const toHubError = (e: UpstreamError): TooManyRequests | UpstreamFailure => {
  if (e.kind === "timeout") {
    return new UpstreamFailure({
      status: 504,
      message: "The upstream did not answer in time",
      error: "upstream_timeout"
    })
  }
  if (e.kind === "network") {
    return new UpstreamFailure({
      status: 502,
      message: `The upstream could not be reached: ${e.message}`,
      error: "upstream_unreachable"
    })
  }
  if (e.kind === "graph" && e.code === MAINTENANCE) {
    return new UpstreamFailure({
      status: 503,
      message: e.message,
      error: "upstream_maintenance",
      details: upstreamDetails(e),
      retryAfterSeconds: e.retryAfterSeconds ?? 60
    })
  }
  if (THROTTLING_CODES.has(e.code) || (e.kind === "graph" && RETRY_LATER.has(e.code))) {
    return new TooManyRequests({
      message: e.message,
      error: "upstream_rate_limited",
      details: upstreamDetails(e),
      retryAfterSeconds: e.retryAfterSeconds ?? 60
    })
  }
  if (e.code === 190 || e.status === 401) {
    return new UpstreamFailure({
      status: 502,
      message: `The upstream refused the instance's access token: ${e.message}`,
      error: "upstream_auth_failed",
      details: upstreamDetails(e)
    })
  }
  if (e.status >= 400 && e.status < 500) {
    // The statuses the document names for an upstream refusal (Domain/Errors.ts); Graph answers others rarely, if ever.
    const status = e.status === 403 || e.status === 404 ? e.status : 400
    return new UpstreamFailure({
      status,
      message: e.message,
      error: refusalErrorOf(e.code),
      details: upstreamDetails(e)
    })
  }
  return new UpstreamFailure({ status: 502, message: e.message, error: "upstream_error", details: upstreamDetails(e) })
}

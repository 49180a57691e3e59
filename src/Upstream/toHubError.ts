/**
 * How an upstream failure reaches the customer (DESIGN.md): Graph 4xx keeps its status (400, 403
 * or 404; any other 4xx is answered 400) and message with `details.upstream`; throttling is 429 with
 * Retry-After; Graph 5xx is 502; no answer is 502 (network) or 504 (timeout). A rejected access token is the operator's problem, not the caller's,
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

export const toHubError = (e: UpstreamError): TooManyRequests | UpstreamFailure => {
  if (e.kind === "timeout") {
    return new UpstreamFailure({ status: 504, message: "The upstream did not answer in time", error: "upstream_timeout" })
  }
  if (e.kind === "network") {
    return new UpstreamFailure({ status: 502, message: `The upstream could not be reached: ${e.message}`, error: "upstream_unreachable" })
  }
  if (THROTTLING_CODES.has(e.code)) {
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
    return new UpstreamFailure({ status, message: e.message, error: "upstream_error", details: upstreamDetails(e) })
  }
  return new UpstreamFailure({ status: 502, message: e.message, error: "upstream_error", details: upstreamDetails(e) })
}

/**
 * Every expected failure the hub answers with, and how it looks on the wire.
 *
 * A failure is a Schema.TaggedError: handlers fail with `new NotFound({ message })`, and a typed
 * client catches it by its tag. On the wire every failure is one `ErrorBody`,
 * `{statusCode, message, error?, details?}` (the interface fixes it). The `Wire` schemas transform
 * between the two and carry the HTTP status, so the endpoints declare their errors with them: the
 * OpenAPI document then shows ErrorBody under each error status, and HttpApiClient decodes a real
 * answer into the typed error. The edge (Edge/Middleware.ts) renders every failure with `errorBody`,
 * the same function the schemas encode with.
 */
import { HttpApiSchema } from "@effect/platform"
import { ParseResult, Schema } from "effect"

/** What every error answer carries. */
export const ErrorBody = Schema.Struct({
  statusCode: Schema.Int.annotations({ description: "The answer's HTTP status, repeated" }),
  message: Schema.String.annotations({
    description: "What went wrong, in words a person can act on; exactly `Unauthorized` for 401"
  }),
  error: Schema.optional(Schema.String.annotations({
    description:
      "A stable code to branch on, such as validation_failed, malformed_body, not_found, forbidden_token_kind, " +
      "rate_limited, upstream_error, upstream_timeout, not_ready"
  })),
  details: Schema.optional(Schema.Unknown.annotations({
    description: "More about the failure: for validation_failed a list of {field, message}; for an upstream refusal " +
      "{upstream: {code, error_subcode, fbtrace_id}}"
  }))
}).annotations({ identifier: "ErrorBody", description: "The body of every error answer" })

export type ErrorBody = typeof ErrorBody.Type

const fields = {
  message: Schema.String,
  error: Schema.optional(Schema.String),
  details: Schema.optional(Schema.Unknown)
}

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  readonly statusCode = 400
}

/** A 400 naming one field and what is wrong with it: "Invalid request: <field>: <message>". */
export const invalidField = (field: string, message: string, error = "validation_failed") =>
  new BadRequest({ message: `Invalid request: ${field}: ${message}`, error, details: [{ field, message }] })

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.optionalWith(Schema.Literal("Unauthorized"), { default: () => "Unauthorized" as const }) }
) {
  readonly statusCode = 401
}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {
  readonly statusCode = 403
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  readonly statusCode = 404
}

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {
  readonly statusCode = 409
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {
  readonly statusCode = 413
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {
  readonly statusCode = 415
}

export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", {
  ...fields,
  /** Sent as the Retry-After header, not in the body: absent when a client decodes an answer's body. */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {
  readonly statusCode = 429
}

/** The upstream refused (its 4xx status kept), failed (502) or did not answer in time (504). */
export class UpstreamFailure extends Schema.TaggedError<UpstreamFailure>()("UpstreamFailure", {
  ...fields,
  status: Schema.Number,
  /** When the upstream says it will be back (a 503: a throughput upgrade in progress), sent as Retry-After. */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {
  get statusCode() {
    return this.status
  }
}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {
  ...fields,
  /** When to come back, sent as the Retry-After header (overload refusals, a database that cannot be used). */
  retryAfterSeconds: Schema.optional(Schema.Number)
}) {
  readonly statusCode = 503
}

/**
 * The Retry-After of a request the database could not take (unreachable, restarting, full): about
 * what a pool needs to connect again once the server is back, so a client's retry is soon but not a storm.
 */
const STORAGE_RETRY_AFTER_SECONDS = 2

/** The 503 of a request the database could not take: nothing of it was kept; retry after Retry-After. */
export const storageUnavailable = (message: string) =>
  new ServiceUnavailable({ message, error: "storage_unavailable", retryAfterSeconds: STORAGE_RETRY_AFTER_SECONDS })

/** A defect: logged with the request id, answered without any detail. Never raised by a handler on purpose. */
export class InternalServerError extends Schema.TaggedError<InternalServerError>()("InternalServerError", {
  message: Schema.optionalWith(Schema.Literal("Internal Server Error"), {
    default: () => "Internal Server Error" as const
  })
}) {
  readonly statusCode = 500
}

/** Any failure the hub knows how to answer. */
export type HubError =
  | BadRequest
  | Unauthorized
  | Forbidden
  | NotFound
  | Conflict
  | PayloadTooLarge
  | UnsupportedMediaType
  | TooManyRequests
  | UpstreamFailure
  | ServiceUnavailable

const hubErrorTags: ReadonlySet<string> = new Set([
  "BadRequest",
  "Unauthorized",
  "Forbidden",
  "NotFound",
  "Conflict",
  "PayloadTooLarge",
  "UnsupportedMediaType",
  "TooManyRequests",
  "UpstreamFailure",
  "ServiceUnavailable"
])

export const isHubError = (u: unknown): u is HubError =>
  typeof u === "object" && u !== null && "_tag" in u && typeof u._tag === "string" && hubErrorTags.has(u._tag)

/** A failure as the wire carries it (for 401 exactly `{statusCode: 401, message: "Unauthorized"}`). */
export const errorBody = (e: HubError | InternalServerError): ErrorBody =>
  e._tag === "Unauthorized" || e._tag === "InternalServerError" ? { statusCode: e.statusCode, message: e.message } : {
    statusCode: e.statusCode,
    message: e.message,
    ...(e.error === undefined ? {} : { error: e.error }),
    ...(e.details === undefined ? {} : { details: e.details })
  }

/** The seconds of a 429's Retry-After header: whole, at least 1. */
export const retryAfterOf = (e: TooManyRequests): number => Math.max(1, Math.ceil(e.retryAfterSeconds ?? 1))

/** The fields every error class takes, from a body. */
const fieldsOf = (body: ErrorBody) => ({
  message: body.message,
  ...(body.error === undefined ? {} : { error: body.error }),
  ...(body.details === undefined ? {} : { details: body.details })
})

/** Upstream failures carry codes of their own (upstream_error, upstream_timeout, …): so a 400, 403 or 404 tells them apart. */
const fromUpstream = (body: ErrorBody) => body.error?.startsWith("upstream_") === true

/**
 * `errorType` answered with `status`: ErrorBody on the wire, the error in code. Decoding takes a
 * body of that status that `make` accepts, so several errors may share a status.
 */
const answeredAs = <A extends HubError | InternalServerError>(
  errorType: Schema.Schema<A>,
  status: number,
  description: string,
  make: (body: ErrorBody) => A | undefined
) =>
  Schema.transformOrFail(ErrorBody, errorType, {
    strict: true,
    decode: (body, _, ast) => {
      const error = body.statusCode === status ? make(body) : undefined
      return error === undefined
        ? ParseResult.fail(
          new ParseResult.Type(ast, body, `Expected an error answer of status ${status}: ${description}`)
        )
        : ParseResult.succeed(error)
    },
    encode: (error) => ParseResult.succeed(errorBody(error))
  }).annotations(HttpApiSchema.annotations({ status, description }))

const upstreamRefusal = (status: number, what: string) =>
  answeredAs(
    Schema.instanceOf(UpstreamFailure),
    status,
    `The upstream refused the request (${what}); its code, error_subcode and fbtrace_id are in details.upstream`,
    (body) => fromUpstream(body) ? new UpstreamFailure({ ...fieldsOf(body), status }) : undefined
  )

/** Each error as an endpoint declares it: its status, its description, and ErrorBody on the wire. */
export const Wire = {
  BadRequest: answeredAs(
    Schema.instanceOf(BadRequest),
    400,
    "Invalid request: malformed JSON (malformed_body) or a field that breaks a rule (validation_failed, each field and rule in details)",
    (body) => fromUpstream(body) ? undefined : new BadRequest(fieldsOf(body))
  ),
  Unauthorized: answeredAs(
    Schema.instanceOf(Unauthorized),
    401,
    "The token is missing, unknown, revoked or expired (the body is exactly {statusCode: 401, message: \"Unauthorized\"})",
    (body) => body.message === "Unauthorized" ? new Unauthorized() : undefined
  ),
  Forbidden: answeredAs(
    Schema.instanceOf(Forbidden),
    403,
    "The token is valid but not allowed here (forbidden_token_kind), or not for this instance",
    (body) => fromUpstream(body) ? undefined : new Forbidden(fieldsOf(body))
  ),
  NotFound: answeredAs(
    Schema.instanceOf(NotFound),
    404,
    "Unknown id in the caller's organization (another organization's ids are unknown too)",
    (body) => fromUpstream(body) ? undefined : new NotFound(fieldsOf(body))
  ),
  Conflict: answeredAs(
    Schema.instanceOf(Conflict),
    409,
    "The request conflicts with the current state",
    (body) => new Conflict(fieldsOf(body))
  ),
  PayloadTooLarge: answeredAs(
    Schema.instanceOf(PayloadTooLarge),
    413,
    "The body is larger than this endpoint accepts (payload_too_large)",
    (body) => new PayloadTooLarge(fieldsOf(body))
  ),
  UnsupportedMediaType: answeredAs(
    Schema.instanceOf(UnsupportedMediaType),
    415,
    "The file's media type is not allowed for its kind",
    (body) => new UnsupportedMediaType(fieldsOf(body))
  ),
  TooManyRequests: answeredAs(
    Schema.instanceOf(TooManyRequests),
    429,
    "Rate limited, by the hub's pacing (rate_limited) or by the upstream (upstream_rate_limited): retry after the Retry-After header's seconds",
    (body) => new TooManyRequests(fieldsOf(body))
  ),
  ServiceUnavailable: answeredAs(
    Schema.instanceOf(ServiceUnavailable),
    503,
    "The hub cannot take the request now (starting, stopping, overloaded, or its database unavailable); retry shortly",
    (body) => fromUpstream(body) ? undefined : new ServiceUnavailable(fieldsOf(body))
  ),
  UpstreamBadRequest: upstreamRefusal(400, "a Graph 4xx such as an invalid parameter"),
  UpstreamForbidden: upstreamRefusal(403, "the instance's access token lacks a permission"),
  UpstreamNotFound: upstreamRefusal(404, "an object the upstream does not know"),
  UpstreamBadGateway: answeredAs(
    Schema.instanceOf(UpstreamFailure),
    502,
    "The upstream failed, could not be reached, or refused the instance's access token",
    (body) => new UpstreamFailure({ ...fieldsOf(body), status: 502 })
  ),
  InternalServerError: answeredAs(
    Schema.instanceOf(InternalServerError),
    500,
    "An unexpected failure, logged under the request id (x-request-id); the body is exactly {statusCode: 500, message: \"Internal Server Error\"}",
    (body) => body.message === "Internal Server Error" ? new InternalServerError() : undefined
  ),
  UpstreamUnavailable: answeredAs(
    Schema.instanceOf(UpstreamFailure),
    503,
    "The upstream cannot take the request for a while (upstream_maintenance: a throughput upgrade, code 131057): retry after the Retry-After header's seconds",
    (body) => fromUpstream(body) ? new UpstreamFailure({ ...fieldsOf(body), status: 503 }) : undefined
  ),
  UpstreamTimeout: answeredAs(
    Schema.instanceOf(UpstreamFailure),
    504,
    "The upstream did not answer in time (upstream_timeout)",
    (body) => new UpstreamFailure({ ...fieldsOf(body), status: 504 })
  )
}

/** Every way an endpoint that calls the upstream can fail because of it: refusals kept 4xx, throttling 429, 502, 504. */
export const UpstreamErrors = Schema.Union(
  Wire.UpstreamBadRequest,
  Wire.UpstreamForbidden,
  Wire.UpstreamNotFound,
  Wire.TooManyRequests,
  Wire.UpstreamBadGateway,
  Wire.UpstreamUnavailable,
  Wire.UpstreamTimeout
)

/** One `details` entry of a validation failure. */
export interface FieldIssue {
  readonly field: string
  readonly message: string
}

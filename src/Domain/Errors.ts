/**
 * Every expected failure the hub answers with. Each is a Schema.TaggedError annotated with its HTTP
 * status; ErrorResponse renders them all as `{statusCode, message, error?, details?}`.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

const fields = {
  message: Schema.String,
  error: Schema.optional(Schema.String),
  details: Schema.optional(Schema.Unknown)
}

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields, HttpApiSchema.annotations({ status: 400 })) {
  readonly statusCode = 400
}

export class Unauthorized extends Schema.TaggedError<Unauthorized>()(
  "Unauthorized",
  { message: Schema.optionalWith(Schema.Literal("Unauthorized"), { default: () => "Unauthorized" as const }) },
  HttpApiSchema.annotations({ status: 401 })
) {
  readonly statusCode = 401
}

export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields, HttpApiSchema.annotations({ status: 403 })) {
  readonly statusCode = 403
}

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields, HttpApiSchema.annotations({ status: 404 })) {
  readonly statusCode = 404
}

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields, HttpApiSchema.annotations({ status: 409 })) {
  readonly statusCode = 409
}

export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields, HttpApiSchema.annotations({ status: 413 })) {
  readonly statusCode = 413
}

export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()(
  "UnsupportedMediaType",
  fields,
  HttpApiSchema.annotations({ status: 415 })
) {
  readonly statusCode = 415
}

export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()(
  "TooManyRequests",
  { ...fields, retryAfterSeconds: Schema.Number },
  HttpApiSchema.annotations({ status: 429 })
) {
  readonly statusCode = 429
}

export class UpstreamFailure extends Schema.TaggedError<UpstreamFailure>()(
  "UpstreamFailure",
  { ...fields, status: Schema.Number },
  HttpApiSchema.annotations({ status: 502 })
) {
  get statusCode() {
    return this.status
  }
}

export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()(
  "ServiceUnavailable",
  // Overload refusals say when to come back (Retry-After); a store that is down does not know.
  { ...fields, retryAfterSeconds: Schema.optional(Schema.Number) },
  HttpApiSchema.annotations({ status: 503 })
) {
  readonly statusCode = 503
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

/** One `details` entry of a validation failure. */
export interface FieldIssue {
  readonly field: string
  readonly message: string
}

/** A failed upstream call, decoded from the Graph error envelope (or a timeout / network failure). */
import { Data } from "effect"
import type { JsonObject } from "../Domain/Json.js"

export class UpstreamError extends Data.TaggedError("UpstreamError")<{
  /** graph: the upstream answered with an error envelope; timeout and network: no answer. */
  readonly kind: "graph" | "timeout" | "network"
  /** HTTP status of the upstream answer (0 when there was none). */
  readonly status: number
  /** Graph `error.code` (0 when there was no envelope). */
  readonly code: number
  readonly subcode: number | undefined
  readonly message: string
  readonly fbtraceId: string | undefined
  /** Graph `error.error_data.details`, when given. */
  readonly details: string | undefined
  /** Seconds from a Retry-After header, when given. */
  readonly retryAfterSeconds: number | undefined
  /**
   * The whole error answer, for the codes whose answer reports a partial outcome
   * (PARTIAL_OUTCOME_CODES); absent otherwise.
   */
  readonly answer?: JsonObject
  /**
   * The upstream answered 2xx, but not as the call returns: it may have done what was asked (a send
   * may have gone), so the call must not be made again for it.
   */
  readonly answeredOk?: true
}> {}

/**
 * Graph codes whose error answer carries the call's outcome beside the error: 139100, Block Users'
 * "failed to block/unblock some users", lists each user it did and did not take.
 */
export const PARTIAL_OUTCOME_CODES: ReadonlySet<number> = new Set([139100])

/** Graph codes that mean throttling: app, WABA, throughput and pair rate limits. */
export const THROTTLING_CODES: ReadonlySet<number> = new Set([4, 80007, 130429, 131056])

/** An error the upstream answered with, in the decoded form (fields it did not give stay undefined). */
export const graphError = (fields: {
  readonly status: number
  readonly code: number
  readonly message: string
  readonly subcode?: number | undefined
  readonly fbtraceId?: string | undefined
  readonly details?: string | undefined
  readonly retryAfterSeconds?: number | undefined
  readonly answer?: JsonObject | undefined
  readonly answeredOk?: true
}) =>
  new UpstreamError({
    kind: "graph",
    status: fields.status,
    code: fields.code,
    subcode: fields.subcode,
    message: fields.message,
    fbtraceId: fields.fbtraceId,
    details: fields.details,
    retryAfterSeconds: fields.retryAfterSeconds,
    ...(fields.answer === undefined ? {} : { answer: fields.answer }),
    ...(fields.answeredOk === undefined ? {} : { answeredOk: fields.answeredOk })
  })

/** The upstream gave no answer: it timed out or could not be reached. */
export const noAnswer = (kind: "timeout" | "network", message: string) =>
  new UpstreamError({
    kind,
    status: 0,
    code: 0,
    subcode: undefined,
    message,
    fbtraceId: undefined,
    details: undefined,
    retryAfterSeconds: undefined
  })

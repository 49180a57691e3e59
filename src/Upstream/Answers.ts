/**
 * Reading upstream answers in handlers: a missing object becomes the hub's 404 (never revealing
 * whether it exists for someone else), and an answer the hub cannot read becomes a 502.
 */
import { Effect, ParseResult, Schema } from "effect"
import { NotFound, type TooManyRequests, UpstreamFailure } from "../Domain/Errors.js"
import { toHubError } from "./toHubError.js"
import type { UpstreamError } from "./UpstreamError.js"

/** Graph's ways of saying "no such object (for this token)": HTTP 404, code 100 subcode 33, code 803. */
const isMissingObject = (e: UpstreamError): boolean =>
  e.kind === "graph" && (e.status === 404 || (e.code === 100 && e.subcode === 33) || e.code === 803)

/** toHubError, except that a missing object is a plain 404 naming what was asked for. */
export const toHubErrorOrNotFound =
  (what: string) => (e: UpstreamError): NotFound | TooManyRequests | UpstreamFailure =>
    isMissingObject(e) ? new NotFound({ message: `${what} was not found`, error: "not_found" }) : toHubError(e)

/** Decodes an upstream answer with the given schema; an unreadable one is a 502 naming the problem. */
export const decodeAnswer =
  <A, I>(schema: Schema.Schema<A, I>, what: string) => (answer: unknown): Effect.Effect<A, UpstreamFailure> =>
    Schema.decodeUnknown(schema)(answer).pipe(
      Effect.mapError((e) =>
        new UpstreamFailure({
          status: 502,
          message: `The upstream answered ${what} in an unexpected shape: ${
            ParseResult.TreeFormatter.formatErrorSync(e)
          }`,
          error: "upstream_invalid_response"
        })
      )
    )

/** `{success}` as Graph answers it (sometimes with messaging_product beside it). */
export const SuccessAnswer = Schema.Struct({ success: Schema.Boolean })

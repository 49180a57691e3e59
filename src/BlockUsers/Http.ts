import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { HubApi } from "../Api.js"
import { type TooManyRequests, UpstreamFailure } from "../Domain/Errors.js"
import { GraphList, isJsonObject, type JsonObject, limitText } from "../Domain/Json.js"
import { forwardedBody } from "../Domain/Schemas.js"
import { isBusinessScopedUserId } from "../Domain/UserIds.js"
import { requestTarget, selectorOf } from "../Instances/RequestTarget.js"
import { decodeAnswer } from "../Upstream/Answers.js"
import { toHubError, upstreamDetails } from "../Upstream/toHubError.js"
import { Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"
import { BlockedUser, type FailedUser, UserOutcome, type UsersChange } from "./Api.js"

/** A refused user as the upstream lists it: its errors (Meta's examples write the code as text too). */
const GraphFailedUser = Schema.Struct({
  input: Schema.String,
  wa_id: Schema.optional(Schema.String),
  user_id: Schema.optional(Schema.String),
  errors: Schema.optional(Schema.Array(Schema.Struct({
    message: Schema.optional(Schema.String),
    code: Schema.optional(Schema.Union(Schema.Number, Schema.NumberFromString)),
    error_data: Schema.optional(Schema.Struct({ details: Schema.optional(Schema.String) }))
  })))
})

/** The upstream's `block_users` outcome: the users taken (added or removed) and those refused. */
const Outcome = Schema.Struct({
  added_users: Schema.optional(Schema.Array(UserOutcome)),
  removed_users: Schema.optional(Schema.Array(UserOutcome)),
  failed_users: Schema.optional(Schema.Array(GraphFailedUser))
})
type Outcome = typeof Outcome.Type

const ChangeAnswer = Schema.Struct({ block_users: Outcome })
const decodeOutcome = Schema.decodeUnknownOption(Outcome)

/** Which list of the outcome holds the users the call took. */
type Taken = "added_users" | "removed_users"

/** The upstream's body: the caller's fields the hub does not model, then the hub's. */
const upstreamBody = (payload: typeof UsersChange.Type): JsonObject => {
  return {
    ...forwardedBody(payload, ["users", "instance_id", "phone_number_id"]),
    messaging_product: "whatsapp",
    block_users: payload.users.map((
      user
    ) => (isBusinessScopedUserId(user) ? { user_id: user } : { user: user.replace(/^\+/, "") }))
  }
}

/**
 * The outcome a 139100 answer reports, wherever it lists the refused users: beside the error
 * (`block_users`, as Meta documents it) or in its `error_data`.
 */
const partialOutcome = (e: UpstreamError): Outcome | undefined => {
  const answer = e.answer
  if (answer === undefined) return undefined
  const error = answer.error
  const data = isJsonObject(error) ? error.error_data : undefined
  const places = [answer.block_users, isJsonObject(data) ? data.block_users : undefined, data]
  for (const place of places) {
    const outcome = Option.getOrUndefined(decodeOutcome(place))
    if (outcome?.failed_users !== undefined) return outcome
  }
  return undefined
}

const failedUser = (user: typeof GraphFailedUser.Type): typeof FailedUser.Type => {
  const first = user.errors?.[0]
  return {
    input: user.input,
    ...(user.wa_id === undefined ? {} : { wa_id: user.wa_id }),
    ...(user.user_id === undefined ? {} : { user_id: user.user_id }),
    code: first?.code ?? 139100,
    message: first?.message ?? "The upstream refused this user",
    ...(first?.error_data?.details === undefined ? {} : { details: first.error_data.details })
  }
}

const failedOf = (outcome: Outcome) =>
  outcome.failed_users === undefined || outcome.failed_users.length === 0
    ? {}
    : { failed_users: outcome.failed_users.map(failedUser) }

/** Every user refused: the upstream's error as the hub answers it, the refused users in its details. */
const refusedAll = (e: UpstreamError, outcome: Outcome | undefined): TooManyRequests | UpstreamFailure => {
  const hubError = toHubError(e)
  const failed = outcome === undefined ? {} : failedOf(outcome)
  if (hubError._tag !== "UpstreamFailure" || failed.failed_users === undefined) return hubError
  return new UpstreamFailure({
    status: hubError.status,
    message: hubError.message,
    error: hubError.error,
    details: { ...upstreamDetails(e), failed_users: failed.failed_users },
    retryAfterSeconds: hubError.retryAfterSeconds
  })
}

export const BlockUsersHttpLive = HttpApiBuilder.group(HubApi, "blockUsers", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream

    /**
     * Blocks or unblocks the payload's users: the users taken and those refused. A 139100 that took
     * some users is their outcome; one that took none, and any other failure, is the upstream's error.
     */
    const change = (
      payload: typeof UsersChange.Type,
      taken: Taken,
      call: (target: UpstreamTarget, body: JsonObject) => Effect.Effect<JsonObject, UpstreamError>,
      what: string
    ) =>
      Effect.gen(function*() {
        const target = yield* requestTarget(selectorOf(payload))
        const outcome = yield* call(target, upstreamBody(payload)).pipe(
          Effect.flatMap(decodeAnswer(ChangeAnswer, what)),
          Effect.map((answer) => answer.block_users),
          Effect.catchTag("UpstreamError", (e) => {
            const partial = partialOutcome(e)
            return partial !== undefined && (partial[taken] ?? []).length > 0
              ? Effect.succeed(partial)
              : Effect.fail(refusedAll(e, partial))
          })
        )
        return { users: outcome[taken] ?? [], ...failedOf(outcome) }
      })

    return handlers
      .handle("block", ({ payload }) =>
        Effect.map(
          change(payload, "added_users", upstream.blockUsers, "the user block"),
          ({ users, ...failed }) => ({ added_users: users, ...failed })
        )
          .pipe(Effect.withSpan("BlockUsers.block")))
      .handle("unblock", ({ payload }) =>
        Effect.map(
          change(payload, "removed_users", upstream.unblockUsers, "the user unblock"),
          ({ users, ...failed }) => ({ removed_users: users, ...failed })
        )
          .pipe(Effect.withSpan("BlockUsers.unblock")))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget(selectorOf(urlParams))
          const query = { limit: limitText(urlParams.limit), after: urlParams.after, before: urlParams.before }
          return yield* upstream.listBlockedUsers(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(BlockedUser), "the blocked user list"))
          )
        }))
  }))

/**
 * Block Users: block, unblock and list the WhatsApp users blocked from the instance's number
 * (instance tokens; organization tokens name the instance). The hub builds the upstream's
 * `block_users` from `users`: a number as `user` (without its +), a business-scoped user id as
 * `user_id`; every other field of the body goes upstream unchanged.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphId } from "../Domain/Ids.js"
import { GraphLimit, GraphList, PassThrough } from "../Domain/Json.js"
import { ForwardedRequest, IdString, RequestStruct } from "../Domain/Schemas.js"
import { BSUID, USER_NUMBER } from "../Domain/UserIds.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"

const MAX_USERS = 1000

const notAUser = (actual: unknown) =>
  `${
    JSON.stringify(actual) ?? String(actual)
  } is neither a phone number (6 to 15 digits, a leading + allowed) nor a business-scoped user id such as US.13491208655302741918`

/** Either of the two, as one pattern (the document shows it). */
const USER = new RegExp(`^(${USER_NUMBER.source.slice(1, -1)}|${BSUID.source.slice(1, -1)})$`)

const UserRef = Schema.String.annotations({ message: (issue) => notAUser(issue.actual) }).pipe(
  Schema.pattern(USER, { message: (issue) => notAUser(issue.actual) }),
  Schema.annotations({
    description:
      "A user's phone number (6 to 15 digits, a leading + allowed) or business-scoped user id (such as US.13491208655302741918)"
  })
)

/** The users to block or unblock; the instance (organization tokens); any other field, passed through. */
export const UsersChange = ForwardedRequest({
  users: Schema.Array(UserRef).pipe(
    Schema.minItems(1, { message: () => "must hold at least one user" }),
    Schema.maxItems(MAX_USERS, { message: () => `must hold at most ${MAX_USERS} users` })
  ).annotations({
    description: `The users to block or unblock: 1 to ${MAX_USERS} phone numbers or business-scoped user ids`
  }),
  instance_id: Schema.optional(IdString).annotations({ description: "The instance, for an organization token" }),
  phone_number_id: Schema.optional(GraphId).annotations({
    description: "The instance's phone number id, for an organization token"
  })
})

/** A user the upstream took, as it answered it (`wa_id` for a number, `user_id` for a business-scoped user id). */
export const UserOutcome = PassThrough({
  input: Schema.String,
  wa_id: Schema.optional(Schema.String),
  user_id: Schema.optional(Schema.String)
})

/** A user the upstream refused, with its (first) error. */
export const FailedUser = Schema.Struct({
  input: Schema.String,
  wa_id: Schema.optional(Schema.String),
  user_id: Schema.optional(Schema.String),
  code: Schema.Number.annotations({
    description: "The upstream's error code for this user, such as 131047 (no message from the user in 24 hours)"
  }),
  message: Schema.String,
  details: Schema.optional(Schema.String)
})

const failedUsers = Schema.optional(
  Schema.Array(FailedUser).annotations({
    description: "Users the upstream refused, each with its error; present only when some were refused"
  })
)

const UsersBlocked = Schema.Struct({ added_users: Schema.Array(UserOutcome), failed_users: failedUsers })
const UsersUnblocked = Schema.Struct({ removed_users: Schema.Array(UserOutcome), failed_users: failedUsers })

const BlockedUsersQuery = RequestStruct({
  ...instanceSelectorFields,
  limit: Schema.optional(GraphLimit),
  after: Schema.optional(Schema.String),
  before: Schema.optional(Schema.String)
})

export const BlockedUser = PassThrough({
  messaging_product: Schema.optional(Schema.String),
  wa_id: Schema.optional(Schema.String),
  user_id: Schema.optional(Schema.String)
})

const CHANGE_TEXT =
  "Numbers go upstream as `user` (without +), business-scoped user ids as `user_id`; any other body field is " +
  "passed through. Up to 1000 users; an item that is neither is a 400 naming it, and nothing is sent. When the upstream refuses " +
  "some users (its error 139100) the answer is still 200, listing them in `failed_users` with their errors; when it refuses " +
  "them all, the upstream's error is answered (`block_users_failed`, the refused users in `details.failed_users`). An " +
  "organization token names the instance with `instance_id` or `phone_number_id`."

const EXAMPLE = { users: ["16505551234", "US.13491208655302741918"] }

export class BlockUsersApi extends HttpApiGroup.make("blockUsers")
  .annotate(OpenApi.Description, "WhatsApp users blocked from the instance's phone number.")
  .add(
    HttpApiEndpoint.post("block", "/api/block-users")
      .setPayload(UsersChange)
      .addSuccess(UsersBlocked)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Block users",
          "Blocks the users from contacting the instance's number (the upstream takes only users who messaged it in the last 24 " +
            `hours). ${CHANGE_TEXT}`,
          { example: EXAMPLE }
        )
      )
  )
  .add(
    HttpApiEndpoint.del("unblock", "/api/block-users")
      .setPayload(UsersChange)
      .addSuccess(UsersUnblocked)
      .addError(Wire.PayloadTooLarge)
      .pipe(accepts(apiTokens), documented("Unblock users", `Unblocks the users. ${CHANGE_TEXT}`, { example: EXAMPLE }))
  )
  .add(
    HttpApiEndpoint.get("list", "/api/block-users")
      .setUrlParams(BlockedUsersQuery)
      .addSuccess(GraphList(BlockedUser))
      .pipe(
        accepts(apiTokens),
        documented(
          "List blocked users",
          "The users blocked from the instance's number, from the upstream, with its paging cursors (`limit`, `after`, `before`). " +
            "An organization token names the instance with `instance_id` or `phone_number_id`."
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

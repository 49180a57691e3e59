import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { JsonObjectSchema } from "../Domain/Json.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer, toHubErrorOrNotFound } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { numberHasGroup } from "./Ownership.js"

/** What Graph answers for a group; the count leaves out the business itself. */
const UpstreamGroup = Schema.Struct({
  id: Schema.String,
  subject: Schema.String,
  description: Schema.optionalWith(Schema.String, { default: () => "" }),
  creation_timestamp: Schema.Union(Schema.Int, Schema.NumberFromString.pipe(Schema.int())),
  total_participant_count: Schema.optional(Schema.Int),
  participants: Schema.optional(Schema.Array(JsonObjectSchema))
})

export const GroupsHttpLive = HttpApiBuilder.group(HubApi, "groups", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    return handlers.handle("get", ({ path }) =>
      Effect.gen(function*() {
        const target = yield* requestTarget()
        // Another number's group (the token may reach it) is not this instance's: 404, as for templates and flows.
        if (!(yield* numberHasGroup(upstream, target, path.groupId).pipe(Effect.mapError(toHubError)))) {
          return yield* new NotFound({ message: `group ${path.groupId} was not found`, error: "not_found" })
        }
        const group = yield* upstream.getGroup(target, path.groupId).pipe(
          Effect.mapError(toHubErrorOrNotFound(`group ${path.groupId}`)),
          Effect.flatMap(decodeAnswer(UpstreamGroup, "the group lookup"))
        )
        return {
          id: group.id,
          subject: group.subject,
          description: group.description,
          creation_time: group.creation_timestamp,
          participants_count: group.total_participant_count ?? group.participants?.length ?? 0
        }
      }))
  }))

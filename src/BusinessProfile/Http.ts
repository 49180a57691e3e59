import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { JsonObjectSchema } from "../Domain/Json.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { BusinessProfile } from "./Api.js"

/**
 * Graph answers `{data: [profile]}`; Meta's OpenAPI examples nest it once more as
 * `{data: [{business_profile: profile}]}`. Both unwrap to the profile.
 */
const ProfileAnswer = Schema.Struct({ data: Schema.Array(JsonObjectSchema) })
const Nested = Schema.Struct({ business_profile: JsonObjectSchema })

export const BusinessProfileHttpLive = HttpApiBuilder.group(
  HubApi,
  "businessProfile",
  (handlers) =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      return handlers.handle("get", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const answer = yield* upstream.getBusinessProfile(target, urlParams).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(ProfileAnswer, "the business profile"))
          )
          const first = answer.data[0]
          if (first === undefined) {
            return yield* new NotFound({ message: "The phone number has no business profile", error: "not_found" })
          }
          const profile = Schema.is(Nested)(first) ? first.business_profile : first
          return yield* decodeAnswer(BusinessProfile, "the business profile")(profile)
        }))
    })
)

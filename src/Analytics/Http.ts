import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { GraphList, JsonObjectSchema, limitText } from "../Domain/Json.js"
import { requestTarget, selectorOf } from "../Instances/RequestTarget.js"
import { decodeAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { Activity } from "./Api.js"

export const AnalyticsHttpLive = HttpApiBuilder.group(HubApi, "analytics", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    return handlers
      .handle("activities", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget(selectorOf(urlParams))
          // Times go upstream as the caller wrote them; the hub's `type` is Graph's `activity_type`.
          const query = {
            since: urlParams.since,
            until: urlParams.until,
            limit: limitText(urlParams.limit),
            fields: urlParams.fields,
            after: urlParams.after,
            before: urlParams.before,
            activity_type: urlParams.type
          }
          return yield* upstream.listActivities(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(Activity), "the activity list"))
          )
        }))
      .handle("compliance", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget(selectorOf(urlParams))
          return yield* upstream.getComplianceInfo(target).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(JsonObjectSchema), "the compliance info"))
          )
        }))
  }))

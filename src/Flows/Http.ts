import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { GraphList, JsonObjectSchema, limitText, PassThrough } from "../Domain/Json.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer, SuccessAnswer, toHubErrorOrNotFound } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import { Flow, FlowAsset } from "./Api.js"
import { checkFlowAsset } from "./Assets.js"

const FlowIds = GraphList(PassThrough({ id: Schema.String }))

/** Graph may leave validation_errors out when there are none. */
const UploadAnswer = Schema.Struct({
  success: Schema.Boolean,
  validation_errors: Schema.optionalWith(Schema.Array(JsonObjectSchema), { default: () => [] })
})

/** How many pages of 100 flows the ownership check reads before giving up. */
const MAX_FLOW_PAGES = 10

export const FlowsHttpLive = HttpApiBuilder.group(HubApi, "flows", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream

    /**
     * The flow must be listed under the instance's business account: an access token may reach
     * several accounts, and another tenant's flow is 404 like a missing one.
     */
    const ownedFlow = (target: UpstreamTarget, flowId: string) =>
      Effect.gen(function*() {
        let after: string | undefined = undefined
        for (let page = 0; page < MAX_FLOW_PAGES; page++) {
          const list: typeof FlowIds.Type = yield* upstream.listFlows(target, { fields: "id", limit: "100", after })
            .pipe(
              Effect.mapError(toHubError),
              Effect.flatMap(decodeAnswer(FlowIds, "the flow list"))
            )
          if (list.data.some((flow) => flow.id === flowId)) return target
          after = list.paging?.cursors?.after
          if (after === undefined || list.paging?.next === undefined) break
        }
        return yield* new NotFound({ message: `flow ${flowId} was not found`, error: "not_found" })
      })

    const flowTarget = (flowId: string) => Effect.flatMap(requestTarget(), (target) => ownedFlow(target, flowId))

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const query = { ...urlParams, limit: limitText(urlParams.limit) }
          return yield* upstream.listFlows(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(Flow), "the flow list"))
          )
        }))
      .handle("assets", ({ path }) =>
        Effect.gen(function*() {
          const target = yield* flowTarget(path.flowId)
          return yield* upstream.listFlowAssets(target, path.flowId).pipe(
            Effect.mapError(toHubErrorOrNotFound(`flow ${path.flowId}`)),
            Effect.flatMap(decodeAnswer(GraphList(FlowAsset), "the flow asset list"))
          )
        }))
      .handle("uploadAsset", ({ path, payload }) =>
        Effect.gen(function*() {
          const file = yield* checkFlowAsset(payload)
          const target = yield* flowTarget(path.flowId)
          const answer = yield* upstream.uploadFlowAsset(target, path.flowId, {
            name: payload.name,
            assetType: payload.asset_type,
            file
          }).pipe(
            Effect.mapError(toHubErrorOrNotFound(`flow ${path.flowId}`)),
            Effect.flatMap(decodeAnswer(UploadAnswer, "the flow asset upload"))
          )
          return { success: answer.success, validation_errors: answer.validation_errors }
        }))
      .handle("deprecate", ({ path }) =>
        Effect.gen(function*() {
          const target = yield* flowTarget(path.flowId)
          const answer = yield* upstream.deprecateFlow(target, path.flowId).pipe(
            Effect.mapError(toHubErrorOrNotFound(`flow ${path.flowId}`)),
            Effect.flatMap(decodeAnswer(SuccessAnswer, "the flow deprecation"))
          )
          return { success: answer.success }
        }))
  }))

import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer, SuccessAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"

export const CallsHttpLive = HttpApiBuilder.group(HubApi, "calls", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    return handlers.handle("preAccept", ({ payload }) =>
      Effect.gen(function*() {
        const target = yield* requestTarget()
        const body = {
          messaging_product: "whatsapp",
          to: payload.to,
          action: "pre_accept",
          ...(payload.call_id === undefined ? {} : { call_id: payload.call_id }),
          ...(payload.session === undefined ? {} : { session: { sdp_type: payload.session.sdp_type, sdp: payload.session.sdp } })
        }
        const answer = yield* upstream.callAction(target, body).pipe(
          Effect.mapError(toHubError),
          Effect.flatMap(decodeAnswer(SuccessAnswer, "the call pre-accept"))
        )
        return { success: answer.success }
      }))
  }))

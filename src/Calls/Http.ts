import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { HubApi } from "../Api.js"
import { Conflict } from "../Domain/Errors.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { forwardedBody } from "../Domain/Schemas.js"
import { isBusinessScopedUserId } from "../Domain/UserIds.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { decodeAnswer, SuccessAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { CallsRepo, CallsRepoLive } from "./Repo.js"

/**
 * How long an incoming call counts as ringing without a later event: the user's phone rings for
 * about a minute, and a call whose terminate webhook was lost must not be taken for a new one.
 */
const RINGING_WINDOW_MS = 2 * 60 * 1000

const noRingingCall = (from: string) =>
  new Conflict({
    message:
      `No call from ${from} is ringing on this number: pass call_id, or wait for the call's connect webhook (calls field) to arrive`,
    error: "no_ringing_call"
  })

export const CallsHttpLive = HttpApiBuilder.group(HubApi, "calls", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    const access = yield* InstanceAccess
    const calls = yield* CallsRepo
    return handlers.handle("preAccept", ({ payload }) =>
      Effect.gen(function*() {
        const instance = yield* access.resolve(yield* CurrentPrincipal, {})
        const target = yield* access.target(instance)
        // The wall clock, as the upstream's call timestamps are (not the Effect clock, which tests shift).
        const since = new Date(Date.now() - RINGING_WINDOW_MS).toISOString()
        const callId = payload.call_id ??
          (yield* calls.ringingCallFrom(
            { id: instance.id, organizationId: instance.organizationId },
            payload.to,
            since
          ))
        if (callId === undefined) return yield* noRingingCall(payload.to)
        const body = {
          // Fields the hub does not model go to the Graph as given; `to` is sent as Meta names it.
          ...forwardedBody(payload, ["to"]),
          messaging_product: "whatsapp",
          // A username user is addressed by their business-scoped user id, in Meta's `recipient`.
          ...(isBusinessScopedUserId(payload.to) ? { recipient: payload.to } : { to: payload.to }),
          action: "pre_accept",
          call_id: callId,
          ...(payload.session === undefined
            ? {}
            : { session: { sdp_type: payload.session.sdp_type, sdp: payload.session.sdp } })
        }
        const answer = yield* upstream.callAction(target, body).pipe(
          Effect.mapError(toHubError),
          Effect.flatMap(decodeAnswer(SuccessAnswer, "the call pre-accept"))
        )
        return { success: answer.success }
      }).pipe(Effect.withSpan("Calls.preAccept")))
  })).pipe(Layer.provide(CallsRepoLive))

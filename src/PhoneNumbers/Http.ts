import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { GraphList, limitText } from "../Domain/Json.js"
import { requestTarget, selectorOf } from "../Instances/RequestTarget.js"
import { decodeAnswer, SuccessAnswer } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { PhoneNumber } from "./Api.js"
import { type SettingsUpdate, upstreamBody, withoutPasswords } from "./Settings.js"

export const PhoneNumbersHttpLive = HttpApiBuilder.group(HubApi, "phoneNumbers", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream

    const update = ({ payload }: { readonly payload: typeof SettingsUpdate.Type }) =>
      Effect.gen(function*() {
        const target = yield* requestTarget()
        const answer = yield* upstream.updateSettings(target, upstreamBody(payload)).pipe(
          Effect.mapError(toHubError),
          Effect.flatMap(decodeAnswer(SuccessAnswer, "the settings update"))
        )
        return { success: answer.success }
      })

    return handlers
      .handle("settings", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const include = urlParams.include_sip_credentials === "true"
          const settings = yield* upstream.getSettings(target, include).pipe(Effect.mapError(toHubError))
          // Passwords are shown only when asked for, whatever the upstream sends.
          return include ? settings : withoutPasswords(settings)
        }))
      .handle("updateSettings", update)
      .handle("updateSettingsApi", update)
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget(selectorOf(urlParams))
          const query = {
            fields: urlParams.fields,
            limit: limitText(urlParams.limit),
            after: urlParams.after,
            before: urlParams.before
          }
          return yield* upstream.listPhoneNumbers(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(PhoneNumber), "the phone number list"))
          )
        }))
  }))

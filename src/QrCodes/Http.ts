import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { GraphList, limitText } from "../Domain/Json.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { decodeAnswer, toHubErrorOrNotFound } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream } from "../Upstream/Upstream.js"
import { QrCode } from "./Api.js"

export const QrCodesHttpLive = HttpApiBuilder.group(HubApi, "qrCodes", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const query = { ...urlParams, limit: limitText(urlParams.limit) }
          return yield* upstream.listQrCodes(target, query).pipe(
            Effect.mapError(toHubError),
            Effect.flatMap(decodeAnswer(GraphList(QrCode), "the QR code list"))
          )
        }))
      .handle("get", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const what = `QR code ${path.qrCodeId}`
          // Graph wraps the one code in data[]; the hub answers the object itself.
          const found = yield* upstream.getQrCode(target, path.qrCodeId, urlParams).pipe(
            Effect.mapError(toHubErrorOrNotFound(what)),
            Effect.flatMap(decodeAnswer(GraphList(QrCode), "the QR code lookup"))
          )
          const code = found.data[0]
          if (code === undefined) return yield* new NotFound({ message: `${what} was not found`, error: "not_found" })
          return code
        }))
  }))

/**
 * Upload size limits checked on the declared Content-Length, before the multipart body is read.
 *
 * Why not the multipart parser's own limits (maxFileSize / maxTotalSize): with @effect/platform-bun
 * 0.87, a file part that reaches them rejects a promise nobody handles and the Bun process exits.
 * So the parser runs without limits; a declared length over the limit is refused here at once, a
 * chunked body is bounded by the Bun server's maxRequestBodySize, and each kind's own limit is
 * checked on the file once it is on disk.
 */
import { HttpApiMiddleware, HttpServerRequest } from "@effect/platform"
import { Effect, Layer } from "effect"
import { PayloadTooLarge, Wire } from "../Domain/Errors.js"
import { describeSize, MAX_UPLOAD_BYTES } from "./MediaKinds.js"

/** Room for the multipart framing and the text fields around the file. */
const FRAMING_BYTES = 64 * 1024

const limitBody = (maxFileBytes: number) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const declared = Number(request.headers["content-length"])
    if (Number.isFinite(declared) && declared > maxFileBytes + FRAMING_BYTES) {
      return yield* new PayloadTooLarge({
        message: `The upload is too large: at most ${describeSize(maxFileBytes)} per file`,
        error: "payload_too_large",
        details: { max_bytes: maxFileBytes, content_length: declared }
      })
    }
  })

/** Media uploads: the largest kind (documents, 100 MB). */
export class MediaBodyLimit extends HttpApiMiddleware.Tag<MediaBodyLimit>()("MediaBodyLimit", { failure: Wire.PayloadTooLarge }) {}

export const MediaBodyLimitLive = Layer.succeed(MediaBodyLimit, limitBody(MAX_UPLOAD_BYTES))

/** Flow assets: Meta's 10 MB limit for a flow JSON. */
export const MAX_FLOW_ASSET_BYTES = 10 * 1024 * 1024

export class FlowAssetBodyLimit extends HttpApiMiddleware.Tag<FlowAssetBodyLimit>()("FlowAssetBodyLimit", { failure: Wire.PayloadTooLarge }) {}

export const FlowAssetBodyLimitLive = Layer.succeed(FlowAssetBodyLimit, limitBody(MAX_FLOW_ASSET_BYTES))

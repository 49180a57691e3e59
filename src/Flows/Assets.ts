/**
 * Checks a flow asset before it goes upstream: a FLOW_JSON must be a JSON object, an IMAGE a PNG or
 * JPEG (by its first bytes). The file stays where the multipart parser wrote it.
 */
import type { Multipart } from "@effect/platform"
import { Effect } from "effect"
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from "../Domain/Errors.js"
import { MAX_FLOW_ASSET_BYTES } from "../Media/MediaKinds.js"
import { describeSize, imageFormatOf } from "../Media/MediaKinds.js"
import { emptyFile, readHead } from "../Media/Upload.js"
import type { UploadFile } from "../Upstream/Upstream.js"

const invalidJson = (reason: string) =>
  new BadRequest({
    message: `Invalid request: file: ${reason}`,
    error: "validation_failed",
    details: [{ field: "file", message: reason }]
  })

const isJsonObject = (text: string): boolean => {
  try {
    const parsed: unknown = JSON.parse(text)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
  } catch {
    return false
  }
}

export const checkFlowAsset = (input: {
  readonly file: Multipart.PersistedFile
  readonly name: string
  readonly asset_type: "FLOW_JSON" | "IMAGE"
}): Effect.Effect<UploadFile, BadRequest | PayloadTooLarge | UnsupportedMediaType> =>
  Effect.gen(function*() {
    const onDisk = Bun.file(input.file.path)
    if (onDisk.size === 0) return yield* emptyFile
    if (onDisk.size > MAX_FLOW_ASSET_BYTES) {
      return yield* new PayloadTooLarge({
        message: `A flow asset may be at most ${describeSize(MAX_FLOW_ASSET_BYTES)}; this file is ${
          describeSize(onDisk.size)
        }`,
        error: "payload_too_large",
        details: { max_bytes: MAX_FLOW_ASSET_BYTES, size: onDisk.size }
      })
    }
    if (input.asset_type === "FLOW_JSON") {
      // At most 10 MB (checked above), so reading it to parse it is bounded.
      const text = yield* Effect.promise(() => onDisk.text())
      if (!isJsonObject(text)) {
        return yield* invalidJson("a FLOW_JSON asset must be a JSON object (the flow definition)")
      }
      return {
        filename: input.name,
        mimeType: "application/json",
        size: onDisk.size,
        content: Bun.file(input.file.path, { type: "application/json" })
      }
    }
    const format = imageFormatOf(yield* readHead(input.file.path))
    if (format === undefined) {
      return yield* new UnsupportedMediaType({
        message: "An IMAGE asset must be a PNG or JPEG image",
        error: "unsupported_media_type"
      })
    }
    return {
      filename: input.name,
      mimeType: format,
      size: onDisk.size,
      content: Bun.file(input.file.path, { type: format })
    }
  })

/**
 * Checks an uploaded file (already written to a temporary file by the multipart parser) against
 * the limits table, reading only its size and first bytes, and describes it for the upstream
 * as a Blob backed by that file, so the bytes are never held in memory.
 */
import type { Multipart } from "@effect/platform"
import { Effect } from "effect"
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from "../Domain/Errors.js"
import type { UploadFile } from "../Upstream/Upstream.js"
import {
  baseMimeType,
  describeSize,
  kindFor,
  matchesSignature,
  MEDIA_KIND_NAMES,
  MEDIA_KINDS,
  type MediaKind,
  SIGNATURE_BYTES
} from "./MediaKinds.js"

/** The first bytes of a file on disk. */
export const readHead = (path: string, bytes: number = SIGNATURE_BYTES) =>
  Effect.promise(() => Bun.file(path).slice(0, bytes).bytes())

export const emptyFile = new BadRequest({
  message: "Invalid request: file: must not be empty",
  error: "validation_failed",
  details: [{ field: "file", message: "must not be empty" }]
})

const allowedTypes = (kind: MediaKind | undefined) =>
  kind === undefined ? [...new Set(MEDIA_KIND_NAMES.flatMap((k) => MEDIA_KINDS[k].types))] : MEDIA_KINDS[kind].types

export const checkMediaUpload = (input: {
  readonly file: Multipart.PersistedFile
  readonly type: string
  readonly kind?: MediaKind | undefined
}): Effect.Effect<UploadFile, BadRequest | PayloadTooLarge | UnsupportedMediaType> =>
  Effect.gen(function*() {
    const mimeType = baseMimeType(input.type)
    const kind = kindFor(mimeType, input.kind)
    if (kind === undefined) {
      const what = input.kind === undefined ? "media" : `a ${input.kind}`
      return yield* new UnsupportedMediaType({
        message: `Type ${mimeType} is not allowed for ${what}; allowed: ${allowedTypes(input.kind).join(", ")}`,
        error: "unsupported_media_type"
      })
    }
    const blob = Bun.file(input.file.path, { type: mimeType })
    const rule = MEDIA_KINDS[kind]
    if (blob.size === 0) return yield* emptyFile
    if (blob.size > rule.maxBytes) {
      return yield* new PayloadTooLarge({
        message: `A ${kind} (${mimeType}) may be at most ${rule.maxLabel}; this file is ${describeSize(blob.size)}`,
        error: "payload_too_large",
        details: { kind, max_bytes: rule.maxBytes, size: blob.size }
      })
    }
    if (!matchesSignature(mimeType, yield* readHead(input.file.path))) {
      const message = `the file's content is not ${mimeType}`
      return yield* new BadRequest({
        message: `Invalid request: type: ${message}`,
        error: "type_mismatch",
        details: [{ field: "type", message }]
      })
    }
    return { filename: input.file.name, mimeType, size: blob.size, content: blob }
  })

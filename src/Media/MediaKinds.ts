/**
 * What may be uploaded: the spec's limits table per kind, and the file signatures ("magic bytes")
 * that tell whether a file's content matches the MIME type it was declared with.
 */
import type { RouteBodyLimit } from "../Domain/Access.js"
import { PayloadTooLarge } from "../Domain/Errors.js"

export type MediaKind = "image" | "audio" | "video" | "document" | "sticker"

export interface KindRule {
  readonly types: ReadonlyArray<string>
  readonly maxBytes: number
  readonly maxLabel: string
}

const KB = 1024
const MB = 1024 * 1024

/**
 * Order matters for inference: image/webp is both an image and a sticker; without an explicit
 * `kind` it is taken as an image (5 MB), since the upload alone does not say how it will be sent.
 */
export const MEDIA_KINDS: Readonly<Record<MediaKind, KindRule>> = {
  image: { types: ["image/jpeg", "image/png", "image/webp"], maxBytes: 5 * MB, maxLabel: "5 MB" },
  audio: { types: ["audio/aac", "audio/mp4", "audio/mpeg", "audio/ogg"], maxBytes: 16 * MB, maxLabel: "16 MB" },
  video: { types: ["video/mp4", "video/3gp"], maxBytes: 16 * MB, maxLabel: "16 MB" },
  document: {
    types: [
      "application/pdf",
      "text/plain",
      "application/msword",
      "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
      "application/vnd.ms-excel",
      "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
      "application/vnd.ms-powerpoint",
      "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    ],
    maxBytes: 100 * MB,
    maxLabel: "100 MB"
  },
  sticker: { types: ["image/webp"], maxBytes: 100 * KB, maxLabel: "100 KB" }
}

export const MEDIA_KIND_NAMES: ReadonlyArray<MediaKind> = ["image", "audio", "video", "document", "sticker"]

/** The largest upload of any kind: the multipart parser cuts bodies beyond it early. */
export const MAX_UPLOAD_BYTES = 100 * MB

/** Meta's limit for a flow asset (a flow JSON or an image). */
export const MAX_FLOW_ASSET_BYTES = 10 * MB

/** Room for the multipart framing and the text fields around an uploaded file. */
const MULTIPART_FRAMING_BYTES = 64 * 1024

/** An upload route's body limit: its largest file and the multipart framing (each kind's own limit is checked on the file). */
const uploadBodyLimit = (maxFileBytes: number): RouteBodyLimit => ({
  bytes: maxFileBytes + MULTIPART_FRAMING_BYTES,
  tooLarge: (declared) =>
    new PayloadTooLarge({
      message: `The upload is too large: at most ${describeSize(maxFileBytes)} per file`,
      error: "payload_too_large",
      details: { max_bytes: maxFileBytes, ...(declared === undefined ? {} : { content_length: declared }) }
    })
})

export const MEDIA_UPLOAD_LIMIT = uploadBodyLimit(MAX_UPLOAD_BYTES)
export const FLOW_ASSET_UPLOAD_LIMIT = uploadBodyLimit(MAX_FLOW_ASSET_BYTES)

/** `Image/JPEG; charset=x` → `image/jpeg`. */
export const baseMimeType = (declared: string): string => (declared.split(";")[0] ?? "").trim().toLowerCase()

/** The kind an upload counts as: the one asked for, else the first whose types include the MIME type. */
export const kindFor = (mimeType: string, requested: MediaKind | undefined): MediaKind | undefined => {
  if (requested !== undefined) return MEDIA_KINDS[requested].types.includes(mimeType) ? requested : undefined
  return MEDIA_KIND_NAMES.find((kind) => MEDIA_KINDS[kind].types.includes(mimeType))
}

/** How many leading bytes `matchesSignature` needs. */
export const SIGNATURE_BYTES = 12

const startsWith = (head: Uint8Array, bytes: ReadonlyArray<number>, offset = 0) =>
  head.length >= offset + bytes.length && bytes.every((b, i) => head[offset + i] === b)

const ascii = (text: string) => Array.from(text, (c) => c.charCodeAt(0))

const isJpeg = (head: Uint8Array) => startsWith(head, [0xff, 0xd8, 0xff])
const isPng = (head: Uint8Array) => startsWith(head, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const isWebp = (head: Uint8Array) => startsWith(head, ascii("RIFF")) && startsWith(head, ascii("WEBP"), 8)
/** ISO base media (MP4, M4A, 3GP): a `ftyp` box first. */
const isIsoMedia = (head: Uint8Array) => startsWith(head, ascii("ftyp"), 4)
/** AAC: ADTS frame sync FF F1 / FF F9 (layer bits 00), or an ADIF header. */
const isAac = (head: Uint8Array) =>
  (head[0] === 0xff && ((head[1] ?? 0) & 0xf6) === 0xf0) || startsWith(head, ascii("ADIF"))
/** MP3: an ID3 tag, or an MPEG audio frame sync with a real layer (ADTS has layer 00). */
const isMpegAudio = (head: Uint8Array) =>
  startsWith(head, ascii("ID3")) ||
  (head[0] === 0xff && ((head[1] ?? 0) & 0xe0) === 0xe0 && ((head[1] ?? 0) & 0x06) !== 0)

const SIGNATURES: Readonly<Record<string, (head: Uint8Array) => boolean>> = {
  "image/jpeg": isJpeg,
  "image/png": isPng,
  "image/webp": isWebp,
  "application/pdf": (head) => startsWith(head, ascii("%PDF")),
  "audio/ogg": (head) => startsWith(head, ascii("OggS")),
  "audio/mp4": isIsoMedia,
  "audio/aac": isAac,
  "audio/mpeg": isMpegAudio,
  "video/mp4": isIsoMedia,
  "video/3gp": isIsoMedia
}

/** Whether the file's first bytes fit the declared type; types without a known signature always fit. */
export const matchesSignature = (mimeType: string, head: Uint8Array): boolean => SIGNATURES[mimeType]?.(head) ?? true

/** PNG or JPEG, the image formats a flow asset may be. */
export const imageFormatOf = (head: Uint8Array): "image/png" | "image/jpeg" | undefined =>
  isPng(head) ? "image/png" : isJpeg(head) ? "image/jpeg" : undefined

/** `5242881` → `5.0 MB` for messages. */
export const describeSize = (bytes: number): string =>
  bytes >= MB ? `${(bytes / MB).toFixed(1)} MB` : bytes >= KB ? `${(bytes / KB).toFixed(1)} KB` : `${bytes} bytes`

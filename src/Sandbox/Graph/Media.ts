/**
 * Sandbox media: uploads are kept in memory per phone number; their info carries a sandbox URL
 * that expires after 5 minutes like the upstream's, and downloading it returns the stored bytes.
 */
import { Clock, Effect, Stream } from "effect"
import type { MediaDownload, MediaInfo, UploadFile, UpstreamTarget } from "../../Upstream/Upstream.js"
import { graphError, noAnswer, type UpstreamError } from "../../Upstream/UpstreamError.js"
import { checkReserved, unknownObject } from "./Failures.js"
import { numericId, sha256Hex } from "./Ids.js"
import { INBOUND_MEDIA_PREFIX } from "./Webhooks.js"

export const MEDIA_URL_BASE = "http://sandbox.invalid/media/"
const URL_LIFETIME_MS = 5 * 60 * 1000

interface StoredMedia {
  readonly id: string
  readonly phoneNumberId: string | undefined
  readonly mimeType: string
  readonly bytes: Uint8Array
  readonly sha256: string
}

export const makeMediaStore = () => {
  const media = new Map<string, StoredMedia>()

  /** Media from sandbox inbound messages exists without an upload: a small placeholder file. */
  const find = (id: string, phoneNumberId: string): StoredMedia | undefined => {
    const stored = media.get(id)
    if (stored !== undefined) {
      return stored.phoneNumberId === undefined || stored.phoneNumberId === phoneNumberId
        ? stored
        : undefined
    }
    if (!id.startsWith(INBOUND_MEDIA_PREFIX) || !/^\d+$/.test(id)) return undefined
    const bytes = new TextEncoder().encode(`sandbox inbound media ${id}\n`)
    const placeholder: StoredMedia = {
      id,
      phoneNumberId: undefined,
      mimeType: "text/plain",
      bytes,
      sha256: sha256Hex(bytes)
    }
    media.set(id, placeholder)
    return placeholder
  }

  const upload = (target: UpstreamTarget, file: UploadFile): Effect.Effect<{ readonly id: string }, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.phoneNumberId, file.filename)
      const bytes = new Uint8Array(yield* Effect.promise(() => file.content.arrayBuffer()))
      const id = numericId(16)
      media.set(id, {
        id,
        phoneNumberId: target.phoneNumberId,
        mimeType: file.mimeType,
        bytes,
        sha256: sha256Hex(bytes)
      })
      return { id }
    })

  const info = (
    target: UpstreamTarget,
    mediaId: string
  ): Effect.Effect<MediaInfo & { readonly messaging_product: string }, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.phoneNumberId, mediaId)
      const stored = find(mediaId, target.phoneNumberId)
      if (stored === undefined) return yield* Effect.fail(unknownObject(mediaId))
      const expires = Math.floor(((yield* Clock.currentTimeMillis) + URL_LIFETIME_MS) / 1000)
      return {
        messaging_product: "whatsapp",
        url: `${MEDIA_URL_BASE}${stored.id}?expires=${expires}`,
        mime_type: stored.mimeType,
        sha256: stored.sha256,
        // The real upstream sends the size as a string at times; callers must accept both.
        file_size: String(stored.bytes.byteLength),
        id: stored.id
      }
    })

  const download = (target: UpstreamTarget, url: string): Effect.Effect<MediaDownload, UpstreamError> =>
    Effect.gen(function*() {
      const parsed = URL.canParse(url) ? new URL(url) : undefined
      if (parsed === undefined || !url.startsWith(MEDIA_URL_BASE)) {
        return yield* Effect.fail(noAnswer("network", `The sandbox serves only its own media URLs, not ${url}`))
      }
      const id = parsed.pathname.split("/").at(-1) ?? ""
      const expires = Number(parsed.searchParams.get("expires"))
      const stored = find(id, target.phoneNumberId)
      if (stored === undefined || !(expires * 1000 > (yield* Clock.currentTimeMillis))) {
        return yield* Effect.fail(
          graphError({ status: 404, code: 0, message: "The media URL is unknown or has expired" })
        )
      }
      return {
        contentType: stored.mimeType,
        contentLength: stored.bytes.byteLength,
        body: Stream.succeed(stored.bytes)
      }
    })

  return { upload, info, download }
}

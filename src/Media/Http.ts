import { HttpApiBuilder, HttpServerResponse, type Multipart } from "@effect/platform"
import { Effect, Stream } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { UpstreamFailure } from "../Domain/Errors.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { requestTarget } from "../Instances/RequestTarget.js"
import { toHubErrorOrNotFound } from "../Upstream/Answers.js"
import { toHubError } from "../Upstream/toHubError.js"
import { Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import type { MediaKind } from "./MediaKinds.js"
import { checkMediaUpload } from "./Upload.js"

/** Graph sends file_size as a number or a numeric string; the hub answers an integer. */
const fileSizeOf = (value: number | string) => {
  const size = typeof value === "number" ? value : /^\d+$/.test(value.trim()) ? Number(value) : Number.NaN
  return Number.isSafeInteger(size) && size >= 0
    ? Effect.succeed(size)
    : Effect.fail(
      new UpstreamFailure({
        status: 502,
        message: `The upstream answered an unreadable file_size: ${JSON.stringify(value)}`,
        error: "upstream_invalid_response"
      })
    )
}

/** A download URL that expired (401) or vanished (404) is fetched afresh once. */
const isStaleUrl = (e: { readonly status: number }) => e.status === 401 || e.status === 404

export const MediaHttpLive = HttpApiBuilder.group(HubApi, "media", (handlers) =>
  Effect.gen(function*() {
    const upstream = yield* Upstream
    const { mediaDownloadsPerOrganization } = yield* HubConfig
    /**
     * Each organization's share of downloads streaming at once (HUB_MEDIA_DOWNLOADS_PER_ORGANIZATION):
     * past it its downloads wait their turn, so one tenant's slow downloads never hold every connection.
     */
    const shares = new Map<string, Effect.Semaphore>()
    const shareOf = (organizationId: string) => {
      const known = shares.get(organizationId)
      if (known !== undefined) return known
      const share = Effect.unsafeMakeSemaphore(mediaDownloadsPerOrganization)
      shares.set(organizationId, share)
      return share
    }

    const upload = ({ payload }: {
      readonly payload: {
        readonly file: Multipart.PersistedFile
        readonly type: string
        readonly kind?: MediaKind | undefined
      }
    }) =>
      Effect.gen(function*() {
        const file = yield* checkMediaUpload(payload)
        const target = yield* requestTarget()
        return yield* upstream.uploadMedia(target, file).pipe(Effect.mapError(toHubError))
      })

    const info = (target: UpstreamTarget, mediaId: string) =>
      upstream.getMedia(target, mediaId).pipe(Effect.mapError(toHubErrorOrNotFound(`media ${mediaId}`)))

    return handlers
      .handle("upload", upload)
      .handle("uploadApi", upload)
      .handle("info", ({ path }) =>
        Effect.gen(function*() {
          const media = yield* info(yield* requestTarget(), path.mediaId)
          return {
            url: media.url,
            mime_type: media.mime_type,
            sha256: media.sha256,
            file_size: yield* fileSizeOf(media.file_size),
            id: media.id
          }
        }))
      .handle("download", ({ path }) =>
        Effect.gen(function*() {
          const target = yield* requestTarget()
          const share = shareOf((yield* CurrentPrincipal).organizationId)
          // The place is held from the lookup to the body's last byte (or the client going away).
          yield* share.take(1)
          const release = share.release(1)
          // The URL lives about 5 minutes, so each download asks for a current one, and once more if it went stale.
          const download = yield* info(target, path.mediaId).pipe(
            Effect.flatMap((media) =>
              upstream.downloadMedia(target, media.url).pipe(
                Effect.catchIf(isStaleUrl, () =>
                  Effect.flatMap(info(target, path.mediaId), (fresh) => upstream.downloadMedia(target, fresh.url))),
                Effect.mapError((e) =>
                  e._tag === "UpstreamError" ? toHubErrorOrNotFound(`media ${path.mediaId}`)(e) : e
                ),
                Effect.map((answer) => ({ ...answer, contentType: answer.contentType || media.mime_type }))
              )
            ),
            Effect.onError(() => release)
          )
          // Set as a header too, for servers that honour it; Bun 1.4 drops it from streams (oven-sh/bun#10507).
          return HttpServerResponse.stream(Stream.ensuring(download.body, release), {
            contentType: download.contentType,
            ...(download.contentLength === undefined
              ? {}
              : {
                contentLength: download.contentLength,
                headers: { "content-length": String(download.contentLength) }
              })
          })
        }))
  }))

/** The Graph's media calls: the upload, the lookup, and the download from the URL the lookup answered. */
import { Duration, Effect, Schema, Stream } from "effect"
import { type CallSettings, filePart, getCall, mediaDownloadCall, postFormCall } from "./GraphCall.js"
import {
  answer,
  attempts,
  checked,
  describeHttpError,
  type GraphClient,
  inTime,
  observed,
  timedOut
} from "./GraphExchange.js"
import type { MediaDownload, MediaInfo, UploadFile, UpstreamTarget } from "./Upstream.js"
import { noAnswer, type UpstreamError } from "./UpstreamError.js"

const MediaInfoSchema = Schema.Struct({
  url: Schema.String,
  mime_type: Schema.String,
  sha256: Schema.String,
  file_size: Schema.Union(Schema.Number, Schema.String),
  id: Schema.String
})
const isMediaInfo = Schema.is(MediaInfoSchema)
const isUploadResponse = Schema.is(Schema.Struct({ id: Schema.String }))

/** The hosts Meta serves media downloads from (the `url` of a media object). */
const META_MEDIA_HOSTS = ["fbsbx.com", "fbcdn.net", "facebook.com", "whatsapp.net"]

/**
 * Whether a media URL may be sent the instance's access token: https on one of Meta's media hosts
 * (or one below them), or the origin of HUB_GRAPH_URL itself (where the operator points the hub).
 */
export const isMediaHost = (mediaUrl: string, graphUrl: string): boolean => {
  const url = URL.parse(mediaUrl)
  if (url === null) return false
  if (url.origin === URL.parse(graphUrl)?.origin) return true
  return url.protocol === "https:" && url.username === "" &&
    META_MEDIA_HOSTS.some((host) => url.hostname === host || url.hostname.endsWith(`.${host}`))
}

/** POST /{phone-number-id}/media (multipart: messaging_product, type, file). */
export const uploadMedia = (
  settings: CallSettings,
  client: GraphClient,
  target: UpstreamTarget,
  file: UploadFile
): Effect.Effect<{ readonly id: string }, UpstreamError> => {
  const fields = [
    { name: "messaging_product", value: "whatsapp" },
    { name: "type", value: file.mimeType },
    filePart(file)
  ]
  return checked(
    client,
    postFormCall(settings, target, "uploadMedia", [target.phoneNumberId, "media"], fields),
    isUploadResponse
  )
}

/** GET /{media-id}?phone_number_id=… */
export const getMedia = (
  settings: CallSettings,
  client: GraphClient,
  target: UpstreamTarget,
  mediaId: string
): Effect.Effect<MediaInfo, UpstreamError> =>
  checked<MediaInfo>(
    client,
    getCall(settings, target, "getMedia", [mediaId], { phone_number_id: target.phoneNumberId }),
    isMediaInfo
  )

/** GET <media url> with the instance's token, its body streamed. */
export const downloadMedia = (
  settings: CallSettings,
  client: GraphClient,
  target: UpstreamTarget,
  mediaUrl: string
): Effect.Effect<MediaDownload, UpstreamError> => {
  // The instance's access token goes only where Meta serves media, whatever URL the Graph answered.
  if (!isMediaHost(mediaUrl, settings.graphUrl)) {
    return Effect.fail(
      noAnswer("network", "The upstream answered a media URL that is not on Meta's media hosts; it was not fetched")
    )
  }
  const call = mediaDownloadCall(settings, target, mediaUrl)
  // The answer within the upload timeout, and its body too (below).
  const headersInTime = inTime(client, call, answer(client, call))
  const startedAt = Date.now()
  return observed(call, attempts(client, call, headersInTime)).pipe(
    Effect.map((response) => {
      const length = Number(response.headers["content-length"])
      // The whole download, body included, ends within HUB_GRAPH_UPLOAD_TIMEOUT of its start: a
      // body that trickles in would otherwise hold its connection and its place for good.
      const left = Duration.millis(Math.max(0, Duration.toMillis(call.timeout) - (Date.now() - startedAt)))
      const deadline = Effect.zipRight(Effect.sleep(left), Effect.fail(timedOut(call.what, call.timeout))).pipe(
        Effect.withClock(client.wallClock)
      )
      return {
        contentType: response.headers["content-type"] ?? "application/octet-stream",
        contentLength: Number.isInteger(length) && length >= 0 && response.headers["content-length"] !== undefined
          ? length
          : undefined,
        body: Stream.mapError(
          response.stream,
          (e) => noAnswer("network", `The media download broke off: ${describeHttpError(e)}`)
        ).pipe(
          Stream.interruptWhen(deadline)
        )
      }
    })
  )
}

/** Media: upload (multipart, both spellings of the path), info, and a streaming download (instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, Multipart, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, bodyLimit, instanceOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphId } from "../Domain/Ids.js"
import { RequestStruct } from "../Domain/Schemas.js"
import { MEDIA_UPLOAD_LIMIT } from "./MediaKinds.js"

const MediaUpload = HttpApiSchema.Multipart(
  RequestStruct({
    file: Multipart.SingleFileSchema.annotations({ message: () => "must be exactly one file part" }),
    type: Schema.String.pipe(Schema.nonEmptyString({ message: () => "must be the MIME type of the file" })),
    messaging_product: Schema.Literal("whatsapp").annotations({ message: () => "must be \"whatsapp\"" }),
    kind: Schema.optional(
      Schema.Literal("image", "audio", "video", "document", "sticker").annotations({
        description:
          "Hub extension: how the media will be sent; `sticker` applies the 100 KB sticker limit to image/webp",
        message: () => ({ message: "must be one of image, audio, video, document, sticker", override: true })
      })
    )
  }),
  // No parser size limits: the edge bounds the body as it streams (its bodyLimit annotation), then each kind its file.
  // Every file part stays a file, whatever its content type (the default reads application/json as text).
  { fieldMimeTypes: [] }
)

const MediaUploaded = Schema.Struct({ id: Schema.String })

const MediaInfo = Schema.Struct({
  url: Schema.String.annotations({
    description: "Temporary download URL (about 5 minutes); needs the instance's access token"
  }),
  mime_type: Schema.String,
  sha256: Schema.String,
  file_size: Schema.Int,
  id: Schema.String
})

const MediaPath = Schema.Struct({ mediaId: GraphId })

const upload = <const Name extends string, const Path extends `/${string}`>(name: Name, path: Path) =>
  HttpApiEndpoint.post(name, path)
    .setPayload(MediaUpload)
    .addSuccess(MediaUploaded)
    .addError(Wire.PayloadTooLarge)
    .addError(Wire.UnsupportedMediaType)
    .pipe(
      accepts(instanceOnly),
      bodyLimit(MEDIA_UPLOAD_LIMIT),
      documented(
        "Upload media",
        "multipart/form-data: `file`, `type` (its MIME type) and `messaging_product` (`whatsapp`). Limits by kind: images " +
          "(jpeg, png, webp) 5 MB, audio and video 16 MB, documents 100 MB, stickers (`kind=sticker`, webp) 100 KB. " +
          "The answer's `id` is used as `id` instead of `link` in image, audio, video, document and sticker messages."
      )
    )

export class MediaApi extends HttpApiGroup.make("media")
  .annotate(OpenApi.Description, "Media to send in messages: upload, info and download.")
  .add(upload("upload", "/media"))
  .add(upload("uploadApi", "/api/media"))
  .add(
    HttpApiEndpoint.get("info", "/media/:mediaId")
      .setPath(MediaPath)
      .addSuccess(MediaInfo)
      .pipe(
        accepts(instanceOnly),
        documented(
          "Read media info",
          "The media's MIME type, size, SHA-256 and a temporary download URL (about 5 minutes, needs the instance's access " +
            "token: use the download endpoint instead)."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("download", "/media/:mediaId/download")
      .setPath(MediaPath)
      .addSuccess(
        HttpApiSchema.Uint8Array({ contentType: "application/octet-stream" }).annotations({
          description: "The media bytes, with the upstream's Content-Type and Content-Length"
        })
      )
      .pipe(
        accepts(instanceOnly),
        documented("Download media", "Streams the media's bytes from the upstream with the instance's access token.")
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  // Added before Authentication, so it runs after it: an unauthenticated caller gets 401, not 413.
  .middleware(Authentication)
{}

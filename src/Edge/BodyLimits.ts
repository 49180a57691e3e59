/**
 * Each route's body limit, enforced by the edge as the body streams (Net/BodyLimit.ts): the
 * upstream's posts 8 MiB, uploads their largest kind's limit plus the multipart framing (each kind's
 * own limit is checked on the file), every JSON API route 1 MiB. Bun's own limit is the largest.
 */
import { PayloadTooLarge } from "../Domain/Errors.js"
import { upstreamBodyTooLarge } from "../Ingress/Http.js"
import { MAX_UPSTREAM_BODY } from "../Ingress/Ingress.js"
import { describeSize, MAX_FLOW_ASSET_BYTES, MAX_UPLOAD_BYTES, MULTIPART_FRAMING_BYTES } from "../Media/MediaKinds.js"
import { jsonBodyLimit } from "../Domain/PlainRoute.js"

export interface RouteBodyLimit {
  readonly bytes: number
  /** The 413 for a body over the limit (its declared length, when it declared one). */
  readonly tooLarge: (declared: number | undefined) => PayloadTooLarge
}

const upload = (maxFileBytes: number): RouteBodyLimit => ({
  bytes: maxFileBytes + MULTIPART_FRAMING_BYTES,
  tooLarge: (declared) =>
    new PayloadTooLarge({
      message: `The upload is too large: at most ${describeSize(maxFileBytes)} per file`,
      error: "payload_too_large",
      details: { max_bytes: maxFileBytes, ...(declared === undefined ? {} : { content_length: declared }) }
    })
})

const UPSTREAM: RouteBodyLimit = { bytes: MAX_UPSTREAM_BODY, tooLarge: () => upstreamBodyTooLarge }
const MEDIA = upload(MAX_UPLOAD_BYTES)
const FLOW_ASSET = upload(MAX_FLOW_ASSET_BYTES)
const JSON_ROUTE: RouteBodyLimit = { bytes: jsonBodyLimit.bytes, tooLarge: () => jsonBodyLimit.tooLarge }

const FLOW_ASSETS = /^\/flows\/[^/]+\/assets\/?$/

/** The limit of a request's body, by method and path (without the query). */
export const bodyLimitOf = (method: string, path: string): RouteBodyLimit => {
  if (method !== "POST") return JSON_ROUTE
  if (path === "/upstream/events") return UPSTREAM
  if (path === "/media" || path === "/api/media") return MEDIA
  return FLOW_ASSETS.test(path) ? FLOW_ASSET : JSON_ROUTE
}

/** The largest body any route takes: Bun's own bound on every request. */
export const MAX_BODY_BYTES = Math.max(UPSTREAM.bytes, MEDIA.bytes, FLOW_ASSET.bytes, JSON_ROUTE.bytes)

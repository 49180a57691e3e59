/**
 * Request bodies bounded while they are read, not after. A declared Content-Length over the limit
 * is refused before a byte of the body is read; a body without one (chunked) is counted as it
 * streams and reading stops at the first byte past the limit, so no request holds more memory than
 * its route's limit. The 413 that follows closes the connection (the rest of the body is never read).
 */

/** What a JSON API request's body may weigh (sends, webhooks, templates, settings...): far more than any needs. */
export const JSON_BODY_LIMIT = 1024 * 1024

/** Reading stopped: the body is longer than `limit` bytes. */
export class BodyTooLarge extends Error {
  override readonly name = "BodyTooLarge"
  constructor(readonly limit: number) {
    super(`the request body is larger than ${limit} bytes`)
  }
}

/** The Content-Length a request declares, if it declares a sane one. */
export const declaredLength = (header: string | null | undefined): number | undefined => {
  if (header === null || header === undefined || !/^\d{1,15}$/.test(header.trim())) return undefined
  return Number(header)
}

/** Whether `cause`, or a cause it wraps, is a BodyTooLarge. */
export const isBodyTooLarge = (cause: unknown): boolean => {
  for (let at = cause, depth = 0; at !== undefined && at !== null && depth < 8; depth++) {
    if (at instanceof BodyTooLarge) return true
    at = typeof at === "object" && "cause" in at ? at.cause : undefined
  }
  return false
}

/** A stream that passes at most `limit` bytes through and fails with BodyTooLarge at the first byte past it. */
const counting = (limit: number) => {
  let seen = 0
  return new TransformStream<Uint8Array, Uint8Array>({
    transform: (chunk, controller) => {
      seen += chunk.byteLength
      if (seen > limit) controller.error(new BodyTooLarge(limit))
      else controller.enqueue(chunk)
    }
  })
}

/**
 * The whole body, if it is at most `limit` bytes. A body of a declared length within the limit is
 * read as is (the framing bounds it); otherwise it is counted as it arrives.
 */
export const readBodyAtMost = async (request: Request, limit: number): Promise<Uint8Array | BodyTooLarge> => {
  const declared = declaredLength(request.headers.get("content-length"))
  if (declared !== undefined) {
    return declared > limit
      ? new BodyTooLarge(limit)
      : new Uint8Array(await request.arrayBuffer())
  }
  if (request.body === null) return new Uint8Array(0)
  const parts: Array<Uint8Array> = []
  let length = 0
  const reader = request.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    length += value.byteLength
    if (length > limit) {
      reader.cancel().catch(() => undefined)
      return new BodyTooLarge(limit)
    }
    parts.push(value)
  }
  return Buffer.concat(parts, length)
}

/**
 * The request as `request`, its body bounded as it streams: whoever reads it (JSON, a form, a
 * multipart upload) fails with BodyTooLarge at the first byte past `limit`. Requests whose declared
 * length is within the limit are returned as they are; a larger declared length is the caller's to refuse.
 */
export const boundedRequest = (request: Request, limit: number): Request =>
  request.body === null || declaredLength(request.headers.get("content-length")) !== undefined
    ? request
    : new Request(request.url, {
      method: request.method,
      headers: request.headers,
      body: request.body.pipeThrough(counting(limit)),
      signal: request.signal
    })

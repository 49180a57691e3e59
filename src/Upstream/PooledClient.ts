/**
 * The Graph calls whose body is bytes or nothing, over kept-alive connections (src/Net/KeepAlive.ts)
 * instead of fetch: fetch runs at most 256 requests at once (BUN_CONFIG_MAX_HTTP_REQUESTS) and keeps
 * 64 idle connections, which at the Graph API's latencies caps a busy hub and makes most calls open a
 * TLS connection of their own. Only calls safe to repeat are sent again when a kept connection closes
 * before any answer; a message send never is. The answer is whole when it arrives, so it is read
 * from memory (PooledResponse) rather than through a fetch Response.
 */
import { Cookies, Headers, HttpClientError, type HttpClientRequest, HttpClientResponse, HttpIncomingMessage, UrlParams } from "@effect/platform"
import { Effect, Inspectable, Option, Stream } from "effect"
import { Deadline } from "../Net/Deadline.js"
import { type KeepAlivePool, originOf } from "../Net/Pool.js"
import { HeaderRefused, requestBytes } from "../Net/RequestHead.js"
import type { BodyKept, ReaderAnswer } from "../Net/ResponseReader.js"

/**
 * Whether the environment routes outgoing HTTP through a proxy. The pool connects directly, so the
 * Graph calls then stay on fetch, which honours these variables.
 */
export const usesProxy = (env: Readonly<Record<string, string | undefined>>): boolean =>
  ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"].some((name) => (env[name] ?? "") !== "")

/**
 * Methods whose request may be sent again: HTTP's idempotent ones. HEAD among them, since the reader
 * knows a HEAD answer has no body (src/Net/ResponseReader.ts).
 */
const REPEATABLE = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])

/** The whole answer, up to 16 MB: Graph answers are JSON documents well below it. */
export const WHOLE_ANSWER: BodyKept = { bytes: 16 * 1024 * 1024, whole: true }

/** An answer's headers as a record: repeated ones join with ", " as fetch's Headers does (set-cookie is read apart). */
export const joinedHeaders = (headers: ReadonlyArray<readonly [name: string, value: string]>): Record<string, string> => {
  const record: Record<string, string> = {}
  for (const [name, value] of headers) record[name] = record[name] === undefined ? value : `${record[name]}, ${value}`
  return record
}

/** The request's body as bytes or text, for the pooled path; undefined for a form or a stream (those go through fetch). */
export const bodyBytes = (request: HttpClientRequest.HttpClientRequest): Uint8Array | string | undefined => {
  const body = request.body
  switch (body._tag) {
    case "Empty":
      return new Uint8Array(0)
    case "Uint8Array":
      return body.body
    case "Raw":
      return typeof body.body === "string" || body.body instanceof Uint8Array ? body.body : undefined
    case "FormData":
    case "Stream":
      return undefined
  }
}

/** A whole answer, read from memory. */
class PooledResponse extends Inspectable.Class implements HttpClientResponse.HttpClientResponse {
  readonly [HttpClientResponse.TypeId]: HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  private cachedHeaders: Headers.Headers | undefined

  constructor(readonly request: HttpClientRequest.HttpClientRequest, private readonly answer: ReaderAnswer) {
    super()
  }

  get status() {
    return this.answer.status
  }

  get headers() {
    if (this.cachedHeaders === undefined) {
      this.cachedHeaders = Headers.unsafeFromRecord(joinedHeaders(this.answer.headers))
    }
    return this.cachedHeaders
  }

  get cookies() {
    return Cookies.fromSetCookie(this.answer.headers.flatMap(([name, value]) => (name === "set-cookie" ? [value] : [])))
  }

  get remoteAddress() {
    return Option.none()
  }

  get text() {
    return Effect.succeed(new TextDecoder().decode(this.answer.body))
  }

  get json(): Effect.Effect<unknown, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({
        try: (): unknown => (text === "" ? null : JSON.parse(text)),
        catch: (cause) => new HttpClientError.ResponseError({ request: this.request, response: this, reason: "Decode", cause })
      }))
  }

  get arrayBuffer() {
    return Effect.succeed(new Uint8Array(this.answer.body).buffer)
  }

  get formData(): Effect.Effect<FormData, HttpClientError.ResponseError> {
    return Effect.tryPromise({
      try: () => new Response(new Uint8Array(this.answer.body), { headers: { "content-type": this.headers["content-type"] ?? "" } }).formData(),
      catch: (cause): HttpClientError.ResponseError => new HttpClientError.ResponseError({ request: this.request, response: this, reason: "Decode", cause })
    })
  }

  get urlParamsBody() {
    return Effect.map(this.text, (text) => UrlParams.fromInput(new URLSearchParams(text)))
  }

  get stream(): Stream.Stream<Uint8Array, HttpClientError.ResponseError> {
    return Stream.succeed(new Uint8Array(this.answer.body))
  }

  toJSON(): unknown {
    return { _id: "@effect/platform/HttpClientResponse", request: this.request.toJSON(), status: this.status }
  }
}

export const sendPooled = (pool: KeepAlivePool, timeoutMillis: number | undefined) =>
  (request: HttpClientRequest.HttpClientRequest, body: Uint8Array | string) =>
    Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>((resume) => {
      const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
      if (url._tag === "Left") {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "InvalidUrl", cause: url.left })))
        return
      }
      const bytes = requestBytes(request.method, `${url.right.pathname}${url.right.search}`, url.right.host, request.headers, body)
      if (bytes instanceof HeaderRefused) {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Encode", cause: bytes })))
        return
      }
      const deadline = new Deadline(timeoutMillis)
      const transportError = (cause: unknown) => {
        deadline.settle()
        return Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause }))
      }
      pool.request({
        origin: originOf(url.right),
        bytes,
        resendable: REPEATABLE.has(request.method),
        headRequest: request.method === "HEAD",
        kept: WHOLE_ANSWER,
        signal: deadline.signal
      }).then((outcome) => {
        if (outcome._tag === "Aborted") return resume(transportError(deadline.cause(new Error("the call was aborted"))))
        if (outcome._tag !== "Answer") return resume(transportError(new Error(outcome.message)))
        // The whole answer is in: the deadline has nothing left to bound.
        deadline.settle()
        resume(Effect.succeed(new PooledResponse(request, outcome.answer)))
      })
      return Effect.sync(() => deadline.abort())
    })

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
import { type KeepAlivePool, originOf } from "../Net/KeepAlive.js"
import type { BodyKept, ReaderAnswer } from "../Net/ResponseReader.js"
import { Exchange } from "./Exchange.js"

/**
 * Whether the environment routes outgoing HTTP through a proxy. The pool connects directly, so the
 * Graph calls then stay on fetch, which honours these variables.
 */
export const usesProxy = (env: Readonly<Record<string, string | undefined>>): boolean =>
  ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"].some((name) => (env[name] ?? "") !== "")

/** Methods whose request may be sent again: HTTP's idempotent ones. */
const REPEATABLE = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])

/** The whole answer, up to 16 MB: Graph answers are JSON documents well below it. */
export const WHOLE_ANSWER: BodyKept = { bytes: 16 * 1024 * 1024, whole: true }

/** Headers the pooled path writes itself. */
const OWN_HEADERS = new Set(["host", "content-length", "connection", "transfer-encoding"])
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/

/** An answer's headers as a record: repeated ones join with ", " as fetch's Headers does (set-cookie is read apart). */
export const joinedHeaders = (headers: ReadonlyArray<readonly [name: string, value: string]>): Record<string, string> => {
  const record: Record<string, string> = {}
  for (const [name, value] of headers) record[name] = record[name] === undefined ? value : `${record[name]}, ${value}`
  return record
}

/** The request's body as bytes, for the pooled path; undefined for a form or a stream (those go through fetch). */
export const bodyBytes = (request: HttpClientRequest.HttpClientRequest): Uint8Array | undefined => {
  const body = request.body
  switch (body._tag) {
    case "Empty":
      return new Uint8Array(0)
    case "Uint8Array":
      return body.body
    case "Raw":
      return typeof body.body === "string" ? Buffer.from(body.body) : body.body instanceof Uint8Array ? body.body : undefined
    case "FormData":
    case "Stream":
      return undefined
  }
}

/** The request's head, or why it cannot be written (a header that would break the framing). */
/** An HTTP/1.1 request head for the pooled path, or the error for a header that would break its framing. */
export const requestHeadBytes = (method: string, url: URL, headers: Readonly<Record<string, string>>, length: number): Buffer | Error => {
  let head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`
  for (const [name, value] of Object.entries(headers)) {
    if (OWN_HEADERS.has(name.toLowerCase())) continue
    if (!HEADER_NAME.test(name) || !HEADER_VALUE.test(value)) return new TypeError(`the header ${JSON.stringify(name)} cannot be sent`)
    head += `${name}: ${value}\r\n`
  }
  if (length > 0 || (method !== "GET" && method !== "HEAD")) head += `content-length: ${length}\r\n`
  return Buffer.from(`${head}\r\n`, "latin1")
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
  (request: HttpClientRequest.HttpClientRequest, body: Uint8Array) =>
    Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>((resume) => {
      const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
      if (url._tag === "Left") {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "InvalidUrl", cause: url.left })))
        return
      }
      const head = requestHeadBytes(request.method, url.right, request.headers, body.length)
      if (head instanceof Error) {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Encode", cause: head })))
        return
      }
      const exchange = new Exchange(timeoutMillis)
      const transportError = (cause: unknown) => {
        exchange.settle()
        return Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause }))
      }
      pool.request({
        origin: originOf(url.right),
        bytes: Buffer.concat([head, body]),
        resendable: REPEATABLE.has(request.method),
        kept: WHOLE_ANSWER,
        signal: exchange.controller.signal
      }).then((outcome) => {
        if (outcome._tag === "Aborted") return resume(transportError(exchange.cause(new Error("the call was aborted"))))
        if (outcome._tag !== "Answer") return resume(transportError(new Error(outcome.message)))
        // The whole answer is in: the deadline has nothing left to bound.
        exchange.settle()
        resume(Effect.succeed(new PooledResponse(request, outcome.answer)))
      })
      return Effect.sync(() => exchange.abort())
    })

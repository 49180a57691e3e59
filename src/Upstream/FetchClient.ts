/**
 * A lean @effect/platform HttpClient over fetch, for the Graph calls on the send path.
 *
 * The platform's FetchHttpClient costs about 100 µs a call on top of fetch: each body reader runs
 * `Effect.cached` + `Effect.runSync`, every response is registered in a FinalizationRegistry, and a
 * deadline needs `Effect.timeout`, which forks a timer fiber per call. Here a body reader is one
 * promise, and the client's own deadline (src/Net/Deadline.ts) is a plain timer that aborts the
 * exchange (answer and body) through the AbortSignal fetch already takes. Interrupting a call aborts
 * its request too.
 *
 * Given a kept-alive pool, calls whose body is bytes or nothing go over it instead (PooledClient.ts).
 */
import { Cookies, Headers, HttpClient, HttpClientError, type HttpClientRequest, HttpClientResponse, HttpIncomingMessage, UrlParams } from "@effect/platform"
import { Duration, Effect, Inspectable, Option, Stream } from "effect"
import { Deadline, DeadlineExceeded } from "../Net/Deadline.js"
import type { KeepAlivePool } from "../Net/Pool.js"
import { checkHeaders } from "../Net/RequestHead.js"
import { bodyBytes, sendPooled } from "./PooledClient.js"

/** Whether a client error is this client's deadline (its cause is the deadline's reason). */
export const isTimeout = (e: HttpClientError.HttpClientError): boolean => e.cause instanceof DeadlineExceeded

/** A promise as an effect, without the AbortController `Effect.tryPromise` allocates. */
const fromPromise = <A, E>(run: () => Promise<A>, onError: (thrown: unknown) => E): Effect.Effect<A, E> =>
  Effect.async<A, E>((resume) => {
    run().then((value) => resume(Effect.succeed(value)), (thrown: unknown) => resume(Effect.fail(onError(thrown))))
  })

/** fetch's headers as a record (its Headers already hold lower-case names). */
export const headerRecord = (headers: globalThis.Headers): Record<string, string> => {
  const record: Record<string, string> = {}
  headers.forEach((value, name) => {
    record[name] = value
  })
  return record
}

class FetchResponse extends Inspectable.Class implements HttpClientResponse.HttpClientResponse {
  readonly [HttpClientResponse.TypeId]: HttpClientResponse.TypeId = HttpClientResponse.TypeId
  readonly [HttpIncomingMessage.TypeId]: HttpIncomingMessage.TypeId = HttpIncomingMessage.TypeId
  private cachedHeaders: Headers.Headers | undefined
  private body: Promise<unknown> | undefined

  constructor(
    readonly request: HttpClientRequest.HttpClientRequest,
    private readonly source: Response,
    private readonly deadline: Deadline
  ) {
    super()
  }

  get status() {
    return this.source.status
  }

  get headers() {
    if (this.cachedHeaders === undefined) {
      this.cachedHeaders = Headers.unsafeFromRecord(headerRecord(this.source.headers))
    }
    return this.cachedHeaders
  }

  get cookies() {
    return Cookies.fromSetCookie(this.source.headers.getSetCookie())
  }

  get remoteAddress() {
    return Option.none()
  }

  private failure(cause: unknown, reason: "Decode" | "EmptyBody" = "Decode"): HttpClientError.ResponseError {
    return new HttpClientError.ResponseError({ request: this.request, response: this, reason, cause: this.deadline.cause(cause) })
  }

  /** Reads the body once, whichever reader asks first; the deadline stops counting when it is read. */
  private read<A>(reader: (source: Response) => Promise<A>, is: (u: unknown) => u is A): Effect.Effect<A, HttpClientError.ResponseError> {
    const pending = (this.body ??= reader(this.source).finally(() => this.deadline.settle()))
    return fromPromise(
      () => pending.then((value) => is(value) ? value : Promise.reject(new TypeError("The body was already read in another form"))),
      (thrown) => this.failure(thrown)
    )
  }

  get text() {
    return this.read((source) => source.text(), (u): u is string => typeof u === "string")
  }

  get json(): Effect.Effect<unknown, HttpClientError.ResponseError> {
    return Effect.flatMap(this.text, (text) =>
      Effect.try({ try: (): unknown => (text === "" ? null : JSON.parse(text)), catch: (cause) => this.failure(cause) }))
  }

  get arrayBuffer() {
    return this.read((source) => source.arrayBuffer(), (u): u is ArrayBuffer => u instanceof ArrayBuffer)
  }

  get formData() {
    return this.read((source) => source.formData(), (u): u is FormData => u instanceof FormData)
  }

  get urlParamsBody() {
    return Effect.map(this.text, (text) => UrlParams.fromInput(new URLSearchParams(text)))
  }

  get stream(): Stream.Stream<Uint8Array, HttpClientError.ResponseError> {
    const body = this.source.body
    if (body === null) return Stream.fail(this.failure(undefined, "EmptyBody"))
    return Stream.fromReadableStream(() => body, (cause) => this.failure(cause)).pipe(
      Stream.ensuring(Effect.sync(() => this.deadline.settle()))
    )
  }

  toJSON(): unknown {
    return { _id: "@effect/platform/HttpClientResponse", request: this.request.toJSON(), status: this.status }
  }
}

/** fetch takes bytes over an ArrayBuffer; JSON bodies are, and anything else is copied into one. */
const arrayBacked = (bytes: Uint8Array): Uint8Array<ArrayBuffer> => isOverArrayBuffer(bytes) ? bytes : new Uint8Array(bytes)
const isOverArrayBuffer = (bytes: Uint8Array): bytes is Uint8Array<ArrayBuffer> => bytes.buffer instanceof ArrayBuffer

const isBodyInit = (u: unknown): u is BodyInit =>
  typeof u === "string" || u instanceof Blob || u instanceof ArrayBuffer || ArrayBuffer.isView(u) || u instanceof ReadableStream ||
  u instanceof URLSearchParams || u instanceof FormData

const requestBody = (request: HttpClientRequest.HttpClientRequest): Effect.Effect<BodyInit | undefined> => {
  const body = request.body
  switch (body._tag) {
    case "Empty":
      return Effect.succeed(undefined)
    case "Raw":
      return Effect.succeed(isBodyInit(body.body) ? body.body : undefined)
    case "Uint8Array":
      return Effect.succeed(arrayBacked(body.body))
    case "FormData":
      return Effect.succeed(body.formData)
    case "Stream":
      return Stream.toReadableStreamEffect(body.stream)
  }
}

const send = (timeoutMillis: number | undefined) => (request: HttpClientRequest.HttpClientRequest) =>
  Effect.flatMap(requestBody(request), (body) =>
    Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.HttpClientError>((resume) => {
      const url = UrlParams.makeUrl(request.url, request.urlParams, request.hash)
      if (url._tag === "Left") {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "InvalidUrl", cause: url.left })))
        return
      }
      // fetch writes this head, but a header that would break it is refused here as on the pooled path.
      const refused = checkHeaders(request.headers)
      if (refused !== undefined) {
        resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Encode", cause: refused })))
        return
      }
      const deadline = new Deadline(timeoutMillis)
      fetch(url.right, {
        method: request.method,
        headers: request.headers,
        body: body ?? null,
        signal: deadline.signal,
        ...(request.body._tag === "Stream" ? { duplex: "half" } : {})
      }).then(
        (response) => resume(Effect.succeed(new FetchResponse(request, response, deadline))),
        (thrown: unknown) => {
          const cause = deadline.cause(thrown)
          deadline.settle()
          resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause })))
        }
      )
      return Effect.sync(() => deadline.abort())
    }))

/**
 * An HttpClient whose every exchange (answer and body) must complete within `timeout`; without one,
 * only interruption ends an exchange. A timed-out call fails with a cause `isTimeout` recognises.
 * With `pool`, calls whose body is bytes or nothing go over kept-alive connections (see above).
 */
export const makeFetchClient = (options: { readonly timeout?: Duration.Duration | undefined; readonly pool?: KeepAlivePool } = {}): HttpClient.HttpClient => {
  const timeoutMillis = options.timeout === undefined ? undefined : Duration.toMillis(options.timeout)
  const viaFetch = send(timeoutMillis)
  const pool = options.pool
  const viaPool = pool === undefined ? undefined : sendPooled(pool, timeoutMillis)
  return HttpClient.makeWith<never, never, HttpClientError.HttpClientError, never>((request) =>
    Effect.flatMap(request, (r) => {
      const body = viaPool === undefined ? undefined : bodyBytes(r)
      return viaPool === undefined || body === undefined ? viaFetch(r) : viaPool(r, body)
    }), Effect.succeed)
}

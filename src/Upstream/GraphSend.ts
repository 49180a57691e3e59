/**
 * The Graph send, POST /{phone-number-id}/messages, as a plain promise of its outcome rather than
 * an effect: it is on every send's path, where the HttpClient's combinators and a fiber cost about
 * 60 µs of CPU a send (measured with scripts/bench.ts), a fifth of the whole. It keeps
 * GraphUpstream's rules for a call that may change something upstream: one deadline for the whole
 * exchange, never sent twice, kept-alive connections (fetch when a proxy is configured, since fetch
 * honours it), and the same reading of the answer (GraphAnswer.ts).
 */
import { Duration, Either, Redacted, Schema } from "effect"
import { type KeepAlivePool, originOf } from "../Net/KeepAlive.js"
import { DeadlineExceeded, Exchange } from "./Exchange.js"
import { headerRecord } from "./FetchClient.js"
import { decodeGraphError, malformed, USER_AGENT } from "./GraphAnswer.js"
import { parseJsonObject } from "./Json.js"
import { joinedHeaders, requestHeadBytes, WHOLE_ANSWER } from "./PooledClient.js"
import type { JsonObject, SendMessageResponse, UpstreamTarget } from "./Upstream.js"
import { noAnswer, type UpstreamError } from "./UpstreamError.js"

const SendMessageResponseSchema = Schema.Struct({
  messaging_product: Schema.String,
  contacts: Schema.Array(Schema.Struct({ input: Schema.String, wa_id: Schema.String })),
  messages: Schema.NonEmptyArray(Schema.Struct({ id: Schema.String, message_status: Schema.optionalWith(Schema.String, { exact: true }) }))
})
const isSendMessageResponse = Schema.is(SendMessageResponseSchema)

/** An answer as far as the send reads it. */
interface Answered {
  readonly _tag: "Answered"
  readonly status: number
  readonly headers: () => Record<string, string>
  readonly text: string
}

/** Why an exchange ended without an answer: the deadline, or the network (the message says where). */
const failure = (exchange: Exchange, thrown: unknown, timedOut: () => UpstreamError, reading: boolean): UpstreamError => {
  const cause = exchange.cause(thrown)
  if (cause instanceof DeadlineExceeded) return timedOut()
  const message = cause instanceof Error && cause.message !== "" ? cause.message : reading ? "Decode" : "Transport"
  return noAnswer("network", reading ? `The upstream connection failed while reading the answer: ${message}` : message)
}

export type GraphSend = (target: UpstreamTarget, body: JsonObject) => Promise<Either.Either<SendMessageResponse, UpstreamError>>

export const makeGraphSend = (options: {
  readonly graphUrl: string
  readonly timeout: Duration.Duration
  /** Kept-alive connections; undefined: fetch. */
  readonly pool: KeepAlivePool | undefined
}): GraphSend => {
  const timeoutMillis = Duration.toMillis(options.timeout)
  const timedOut = () => noAnswer("timeout", `The upstream did not answer the send within ${Duration.format(options.timeout)}`)
  const pool = options.pool

  const viaPool = async (pooled: KeepAlivePool, url: URL, head: Buffer, body: Buffer, exchange: Exchange): Promise<Answered | UpstreamError> => {
    const outcome = await pooled.request({
      origin: originOf(url),
      bytes: Buffer.concat([head, body]),
      resendable: false,
      kept: WHOLE_ANSWER,
      signal: exchange.controller.signal
    })
    if (outcome._tag === "Aborted") return failure(exchange, new Error("the call was aborted"), timedOut, false)
    if (outcome._tag !== "Answer") return failure(exchange, new Error(outcome.message), timedOut, false)
    const answer = outcome.answer
    return {
      _tag: "Answered",
      status: answer.status,
      headers: () => joinedHeaders(answer.headers),
      text: answer.body.toString("utf8")
    }
  }

  const viaFetch = async (url: URL, headers: Record<string, string>, body: Buffer, exchange: Exchange): Promise<Answered | UpstreamError> => {
    let response: Response
    try {
      response = await fetch(url, { method: "POST", headers, body: new Uint8Array(body), signal: exchange.controller.signal })
    } catch (thrown) {
      return failure(exchange, thrown, timedOut, false)
    }
    try {
      const text = await response.text()
      return { _tag: "Answered", status: response.status, headers: () => headerRecord(response.headers), text }
    } catch (thrown) {
      return failure(exchange, thrown, timedOut, true)
    }
  }

  return async (target, message) => {
    const url = new URL(`${options.graphUrl}/${encodeURIComponent(target.phoneNumberId)}/messages`)
    const body = Buffer.from(JSON.stringify(message))
    const headers = {
      authorization: `Bearer ${Redacted.value(target.accessToken)}`,
      "user-agent": USER_AGENT,
      "content-type": "application/json",
      accept: "application/json"
    }
    // Built for fetch too: a token that would break the request's framing is refused, as the HttpClient path refuses it.
    const head = requestHeadBytes("POST", url, headers, body.length)
    if (head instanceof Error) return Either.left(noAnswer("network", head.message))
    const exchange = new Exchange(timeoutMillis)
    const answered = pool === undefined
      ? await viaFetch(url, headers, body, exchange)
      : await viaPool(pool, url, head, body, exchange)
    exchange.settle()
    if (answered._tag === "UpstreamError") return Either.left(answered)
    if (answered.status >= 400) return Either.left(decodeGraphError(answered.status, answered.headers(), answered.text))
    const parsed = parseJsonObject(answered.text)
    return parsed !== undefined && isSendMessageResponse(parsed) ? Either.right(parsed) : Either.left(malformed("the send"))
  }
}

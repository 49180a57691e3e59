/**
 * Webhook POSTs over the kept-alive connection pool (src/Net/Pool.ts), to the address UrlPolicy
 * checked; redirects are not followed and the whole exchange is bounded by the timeout. A kept
 * connection that closes before any answer has the POST sent again on a new one: delivery is at
 * least once, and receivers dedupe on webhook-id. Reports what the receiver answered, or why there
 * was no answer. The head is written by src/Net/RequestHead.ts, which refuses a header that would
 * break the request's framing before anything is sent.
 */
import { Data } from "effect"
import { LRUCache } from "lru-cache"
import { type Origin, originOf } from "../Net/Connection.js"
import { makeKeepAlivePool, type PoolOptions } from "../Net/Pool.js"
import { HeaderRefused, requestBytes } from "../Net/RequestHead.js"
import { SNIPPET } from "../Net/ResponseReader.js"
import type { ConnectTarget } from "../Net/UrlPolicy.js"

export const USER_AGENT = "MessagingHub-Webhooks/0.1"

export interface ReceiverAnswer {
  readonly status: number
  readonly retryAfter: string | null
  /** The first KB of the answer's body, as text. */
  readonly snippet: string
}

export class NoAnswer extends Data.TaggedError("NoAnswer")<{ readonly message: string }> {}

interface SendInput {
  readonly target: ConnectTarget
  readonly headers: Record<string, string>
  readonly body: string
  readonly timeoutMs: number
  /** Aborts the attempt (its timeout, the shutdown); the connection is then closed. */
  readonly signal: AbortSignal
}

export interface Sender {
  readonly send: (input: SendInput) => Promise<ReceiverAnswer | NoAnswer>
  /** Closes the idle connections; connections in use close when their attempt ends. */
  readonly close: () => void
}

const utf8 = new TextDecoder()

export const makeSender = (options: PoolOptions): Sender => {
  const pool = makeKeepAlivePool(options)
  const origins = new LRUCache<string, { readonly origin: Origin; readonly path: string }>({ max: 10_000 })

  /** The pinned URL's origin and path, parsed once; the name is part of the key (one address may serve many). */
  const originOfTarget = (target: ConnectTarget) => {
    const cacheKey = `${target.serverName ?? ""} ${target.url}`
    const known = origins.get(cacheKey)
    if (known !== undefined) return known
    const url = new URL(target.url)
    const parsed = { origin: originOf(url, target.serverName), path: `${url.pathname}${url.search}` }
    origins.set(cacheKey, parsed)
    return parsed
  }

  const send = async (input: SendInput): Promise<ReceiverAnswer | NoAnswer> => {
    const { origin, path } = originOfTarget(input.target)
    // The Host is the webhook's own, while the connection goes to the address checked for it.
    const bytes = requestBytes("POST", path, input.target.hostHeader, input.headers, input.body)
    if (bytes instanceof HeaderRefused) return new NoAnswer({ message: bytes.message })
    const outcome = await pool.request({
      origin,
      bytes,
      resendable: true,
      headRequest: false,
      kept: SNIPPET,
      signal: input.signal
    })
    switch (outcome._tag) {
      case "Answer":
        return {
          status: outcome.answer.status,
          retryAfter: outcome.answer.retryAfter,
          snippet: utf8.decode(outcome.answer.body)
        }
      case "Aborted":
        return new NoAnswer({ message: `no answer within ${input.timeoutMs} ms` })
      case "Malformed":
        return new NoAnswer({ message: `the receiver's answer is malformed: ${outcome.message}` })
      case "Unreachable":
        return new NoAnswer({ message: `could not be reached: ${outcome.message}` })
    }
  }

  return { send, close: pool.close }
}

/**
 * One webhook POST: to the checked address (see UrlPolicy), redirects not followed, the whole
 * exchange bounded by the timeout. Reports what the receiver answered, or why there was no answer.
 */
import { Data } from "effect"
import type { ConnectTarget } from "../Webhooks/UrlPolicy.js"

export const USER_AGENT = "MessagingHub-Webhooks/0.1"
export const SNIPPET_BYTES = 1024

export interface ReceiverAnswer {
  readonly status: number
  readonly retryAfter: string | null
  /** The first KB of the answer's body, as text. */
  readonly snippet: string
}

export class NoAnswer extends Data.TaggedError("NoAnswer")<{ readonly message: string }> {}

/** Reads at most `limit` bytes of a body and drops the rest; a body cut short still gives what arrived. */
const readSnippet = async (response: Response, limit: number): Promise<string> => {
  if (response.headers.get("content-length") === "0") return ""
  const reader = response.body?.getReader()
  if (reader === undefined) return ""
  const parts: Array<Uint8Array> = []
  let size = 0
  try {
    while (size < limit) {
      const { done, value } = await reader.read()
      if (done) break
      parts.push(value)
      size += value.byteLength
    }
  } catch {
    // The answer is already known; a body that fails or times out only shortens the snippet.
  } finally {
    reader.cancel().catch(() => undefined)
  }
  return new TextDecoder().decode(Buffer.concat(parts).subarray(0, limit))
}

const describe = (error: unknown, timeoutMs: number): string => {
  if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
    return `no answer within ${timeoutMs} ms`
  }
  const message = error instanceof Error ? error.message : String(error)
  return `could not be reached: ${message}`
}

/**
 * Sends one POST as a plain promise (the dispatcher runs many at once without a fiber each). Bun's
 * fetch keeps connections alive and pools them per origin. `signal` aborts it (timeout, shutdown).
 */
export const sendWebhook = async (input: {
  readonly target: ConnectTarget
  readonly headers: Record<string, string>
  readonly body: string
  readonly timeoutMs: number
  readonly signal: AbortSignal
}): Promise<ReceiverAnswer | NoAnswer> => {
  try {
    const response = await fetch(input.target.url, {
      method: "POST",
      headers: { ...input.headers, host: input.target.hostHeader },
      body: input.body,
      redirect: "manual",
      signal: input.signal,
      ...(input.target.serverName === undefined ? {} : { tls: { serverName: input.target.serverName } })
    })
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      snippet: await readSnippet(response, SNIPPET_BYTES)
    }
  } catch (error) {
    return new NoAnswer({ message: describe(error, input.timeoutMs) })
  }
}

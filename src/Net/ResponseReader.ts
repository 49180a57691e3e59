/**
 * Reads one HTTP/1.1 response at a time off a kept-alive connection, from bytes as they arrive: the
 * status, the headers, the body (its first bytes only, or the whole of it), where the response ends
 * (Content-Length, chunked, or the connection's close) and whether the connection may carry the
 * next request. Informational (1xx) answers are skipped. Anything it cannot frame for certain is
 * Malformed, and the connection is then closed rather than reused.
 */

/** Longest head accepted; a longer one is Malformed. */
const MAX_HEAD_BYTES = 16 * 1024

/** Longest chunk-size or trailer line accepted. */
const MAX_LINE_BYTES = 4 * 1024

/**
 * Most body bytes read past a snippet to keep the connection: a longer answer ends once its
 * snippet is known, and its connection is closed instead of drained.
 */
const MAX_DRAIN_BYTES = 64 * 1024

/** What of the body to keep. */
export interface BodyKept {
  /** Body bytes kept. */
  readonly bytes: number
  /** The whole body is wanted: a longer one is Malformed; otherwise it is cut to `bytes`. */
  readonly whole: boolean
}

/** The first KB of the body, as webhook attempts log it. */
export const SNIPPET: BodyKept = { bytes: 1024, whole: false }

export interface ReaderAnswer {
  readonly status: number
  /** Header names in lower case, in the order received. */
  readonly headers: ReadonlyArray<readonly [name: string, value: string]>
  readonly retryAfter: string | null
  /** The body bytes kept (see BodyKept). */
  readonly body: Buffer
  /** The response ended exactly where the bytes did and the server keeps the connection open. */
  readonly reusable: boolean
}

/** How a response ended: answered, or bytes that cannot be framed. */
export type ReadEnd =
  | { readonly _tag: "Answer"; readonly answer: ReaderAnswer }
  | { readonly _tag: "Malformed"; readonly message: string }

export type ReadOutcome = { readonly _tag: "More" } | ReadEnd

const MORE: ReadOutcome = { _tag: "More" }
const malformed = (message: string): ReadEnd => ({ _tag: "Malformed", message })

type Phase = "head" | "length" | "chunkSize" | "chunkData" | "chunkEnd" | "trailers" | "untilClose"

const CRLF = Buffer.from("\r\n")
const HEAD_END = Buffer.from("\r\n\r\n")
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: .*)?$/
const CHUNK_SIZE = /^([0-9a-fA-F]{1,8})[ \t]*(?:;.*)?$/
const DIGITS = /^\d{1,15}$/

interface Head {
  readonly status: number
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly retryAfter: string | null
  readonly keepAlive: boolean
  readonly framing: { readonly _tag: "none" } | { readonly _tag: "length"; readonly length: number } | { readonly _tag: "chunked" } | { readonly _tag: "untilClose" }
}

const parseHead = (text: string): Head | string => {
  const lines = text.split("\r\n")
  const statusLine = STATUS_LINE.exec(lines[0] ?? "")
  if (statusLine === null) return "the answer is not HTTP/1.x"
  const status = Number(statusLine[2])
  const headers: Array<readonly [string, string]> = []
  let retryAfter: string | null = null
  let connection = ""
  let transferEncoding: string | undefined
  let contentLength: string | undefined
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":")
    // A folded or nameless header line has no safe reading.
    if (colon <= 0 || line[0] === " " || line[0] === "\t") return "the answer has a malformed header line"
    const name = line.slice(0, colon).trim().toLowerCase()
    const value = line.slice(colon + 1).trim()
    headers.push([name, value])
    if (name === "retry-after") retryAfter = value
    else if (name === "connection") connection += `,${value.toLowerCase()}`
    else if (name === "transfer-encoding") transferEncoding = transferEncoding === undefined ? value.toLowerCase() : `${transferEncoding},${value.toLowerCase()}`
    else if (name === "content-length") {
      // Repeated lengths must agree (RFC 9112 6.3).
      const lengths = new Set(value.split(",").map((v) => v.trim()))
      const [only] = lengths
      if (lengths.size !== 1 || only === undefined || !DIGITS.test(only) || (contentLength !== undefined && contentLength !== only)) {
        return "the answer has an invalid Content-Length"
      }
      contentLength = only
    }
  }
  const closes = connection.split(",").some((token) => token.trim() === "close")
  const keepAlive = statusLine[1] === "1" && !closes
  if (status === 204 || status === 304) return { status, headers, retryAfter, keepAlive, framing: { _tag: "none" } }
  if (transferEncoding !== undefined) {
    const codings = transferEncoding.split(",").map((c) => c.trim())
    // Chunked last frames the body; with a Content-Length too, the connection is not trusted again.
    if (codings.at(-1) === "chunked") return { status, headers, retryAfter, keepAlive: keepAlive && contentLength === undefined, framing: { _tag: "chunked" } }
    return { status, headers, retryAfter, keepAlive: false, framing: { _tag: "untilClose" } }
  }
  if (contentLength !== undefined) return { status, headers, retryAfter, keepAlive, framing: { _tag: "length", length: Number(contentLength) } }
  return { status, headers, retryAfter, keepAlive: false, framing: { _tag: "untilClose" } }
}

/** One reader per connection; `reset` before each request. */
export class ResponseReader {
  private kept: BodyKept = SNIPPET
  private phase: Phase = "head"
  private pending: Buffer = Buffer.alloc(0)
  private head: Head | undefined
  private remaining = 0
  private bodyBytes = 0
  private keptParts: Array<Buffer> = []
  private keptBytes = 0

  reset(kept: BodyKept = SNIPPET): void {
    this.kept = kept
    this.phase = "head"
    this.pending = Buffer.alloc(0)
    this.head = undefined
    this.remaining = 0
    this.bodyBytes = 0
    this.keptParts = []
    this.keptBytes = 0
  }

  /** Feeds the bytes that arrived; an Answer or Malformed ends this response. */
  push(chunk: Buffer): ReadOutcome {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    for (;;) {
      const outcome = this.step()
      if (outcome !== undefined) return outcome
    }
  }

  /** The connection closed: a body read until the close ends here; anything else was cut short. */
  closed(): ReadEnd {
    if (this.phase === "untilClose" && this.head !== undefined) return this.answer(false)
    return malformed("the receiver closed the connection before its answer was complete")
  }

  /** Whether any byte of the current response has arrived (a reused connection that closes before it may be retried). */
  started(): boolean {
    return this.phase !== "head" || this.pending.length > 0
  }

  private answer(reusable: boolean): ReadEnd {
    const head = this.head
    if (head === undefined) return malformed("no answer head")
    return {
      _tag: "Answer",
      answer: {
        status: head.status,
        headers: head.headers,
        retryAfter: head.retryAfter,
        body: Buffer.concat(this.keptParts),
        reusable: reusable && head.keepAlive && this.pending.length === 0
      }
    }
  }

  /**
   * Takes `n` body bytes off the front of `pending`, keeping what BodyKept asks for. False once the
   * body is longer than is worth draining (a snippet) or than may be kept (a whole body).
   */
  private body(n: number): boolean {
    const part = this.pending.subarray(0, n)
    this.pending = this.pending.subarray(n)
    if (this.keptBytes < this.kept.bytes) {
      const kept = part.subarray(0, this.kept.bytes - this.keptBytes)
      this.keptParts.push(kept)
      this.keptBytes += kept.length
    }
    this.bodyBytes += n
    return this.bodyBytes <= this.kept.bytes + (this.kept.whole ? 0 : MAX_DRAIN_BYTES)
  }

  /** A body that went past what may be drained: a snippet ends here, a whole body is refused. */
  private tooLong(): ReadEnd {
    return this.kept.whole ? malformed(`the answer's body is longer than ${this.kept.bytes} bytes`) : this.answer(false)
  }

  /** Takes one CRLF-ended line off `pending`; undefined until it is complete. */
  private line(): string | undefined | ReadOutcome {
    const end = this.pending.indexOf(CRLF)
    if (end < 0) return this.pending.length > MAX_LINE_BYTES ? malformed("the answer has an overlong chunk line") : undefined
    const text = this.pending.subarray(0, end).toString("latin1")
    this.pending = this.pending.subarray(end + 2)
    return text
  }

  /** One step of the state machine: an outcome ends the push; undefined means go on. */
  private step(): ReadOutcome | undefined {
    switch (this.phase) {
      case "head": {
        const end = this.pending.indexOf(HEAD_END)
        if (end < 0) return this.pending.length > MAX_HEAD_BYTES ? malformed("the answer's head is too long") : MORE
        const head = parseHead(this.pending.subarray(0, end).toString("latin1"))
        this.pending = this.pending.subarray(end + 4)
        if (typeof head === "string") return malformed(head)
        // An informational answer precedes the real one; 101 was never asked for.
        if (head.status >= 100 && head.status < 200) return head.status === 101 ? malformed("the receiver switched protocols") : undefined
        this.head = head
        switch (head.framing._tag) {
          case "none":
            return this.answer(true)
          case "length":
            this.phase = "length"
            this.remaining = head.framing.length
            return undefined
          case "chunked":
            this.phase = "chunkSize"
            return undefined
          case "untilClose":
            this.phase = "untilClose"
            return undefined
        }
      }
      case "length": {
        const n = Math.min(this.remaining, this.pending.length)
        if (!this.body(n)) return this.tooLong()
        this.remaining -= n
        return this.remaining === 0 ? this.answer(true) : MORE
      }
      case "untilClose": {
        if (!this.body(this.pending.length)) return this.tooLong()
        // A snippet needs no more than its bytes; a whole body ends with the connection.
        return this.kept.whole || this.keptBytes < this.kept.bytes ? MORE : this.answer(false)
      }
      case "chunkSize": {
        const line = this.line()
        if (line === undefined) return MORE
        if (typeof line !== "string") return line
        const size = CHUNK_SIZE.exec(line)
        if (size === null) return malformed("the answer has an invalid chunk size")
        this.remaining = parseInt(size[1] ?? "", 16)
        this.phase = this.remaining === 0 ? "trailers" : "chunkData"
        return undefined
      }
      case "chunkData": {
        const n = Math.min(this.remaining, this.pending.length)
        if (!this.body(n)) return this.tooLong()
        this.remaining -= n
        if (this.remaining > 0) return MORE
        this.phase = "chunkEnd"
        return undefined
      }
      case "chunkEnd": {
        if (this.pending.length < 2) return MORE
        if (this.pending[0] !== 13 || this.pending[1] !== 10) return malformed("the answer has a chunk without its CRLF")
        this.pending = this.pending.subarray(2)
        this.phase = "chunkSize"
        return undefined
      }
      case "trailers": {
        const line = this.line()
        if (line === undefined) return MORE
        if (typeof line !== "string") return line
        return line === "" ? this.answer(true) : undefined
      }
    }
  }
}

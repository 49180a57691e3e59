/**
 * Reads one HTTP/1.1 response at a time off a kept-alive connection, from bytes as they arrive: the
 * status, the headers, the body (its first bytes only, or the whole of it), where the response ends
 * (Content-Length, chunked, or the connection's close) and whether the connection may carry the
 * next request. Informational (1xx) answers are skipped. Anything it cannot frame for certain is
 * Malformed, and the connection is then closed rather than reused; an answer it can frame but that
 * no sound server sends (see Head.keepAlive) is read, and its connection closed all the same.
 *
 * HEAD is handled, not avoided: the pool tells the reader when the request is HEAD, and its answer
 * then ends with its head whatever Content-Length or Transfer-Encoding it announces (RFC 9110 9.3.2).
 * So a HEAD request stays as repeatable as any idempotent request, and never waits for a body that
 * will not come or takes the next answer's bytes for its own.
 */

/** Longest head accepted; a longer one is Malformed. */
const MAX_HEAD_BYTES = 16 * 1024

/** Most header lines in a head; more are Malformed. */
const MAX_HEADER_LINES = 100

/** Longest chunk-size or trailer line accepted. */
const MAX_LINE_BYTES = 4 * 1024

/** Most trailer lines, and their most bytes in all (CRLFs included), after a chunked body; more are Malformed. */
const MAX_TRAILER_LINES = 32
const MAX_TRAILER_BYTES = 8 * 1024

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
/** RFC 9112 4: the reason phrase holds HTAB, SP, visible ASCII and obs-text only (no NUL, no bare CR or LF). */
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d{2})(?: [\t\x20-\x7e\x80-\xff]*)?$/
/**
 * RFC 9110 5.1 and 5.5: a token, the colon right after it (whitespace before the colon is a
 * framing error, RFC 9112 5.1), then the value, trimmed of SP and HTAB. A line starting with
 * whitespace (obs-fold), a NUL, a bare CR or a bare LF never matches.
 */
const FIELD_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[\t ]*([\t\x20-\x7e\x80-\xff]*)$/
const TRAILING_WHITESPACE = /[\t ]+$/

/** A field value without the spaces and tabs that may follow it. */
const trimEnd = (value: string): string => {
  const last = value.charCodeAt(value.length - 1)
  return last === 32 || last === 9 ? value.replace(TRAILING_WHITESPACE, "") : value
}
const CHUNK_SIZE = /^([0-9a-fA-F]{1,8})[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?$/
const DIGITS = /^\d{1,15}$/

type Framing =
  | { readonly _tag: "none" }
  | { readonly _tag: "length"; readonly length: number }
  | { readonly _tag: "chunked" }
  | { readonly _tag: "untilClose" }

const NO_BODY: Framing = { _tag: "none" }
const CHUNKED: Framing = { _tag: "chunked" }
const UNTIL_CLOSE: Framing = { _tag: "untilClose" }

interface Head {
  readonly status: number
  readonly headers: ReadonlyArray<readonly [string, string]>
  readonly retryAfter: string | null
  /**
   * The server keeps the connection and nothing in the head was anomalous. Anything a sound server
   * does not send (framing headers that conflict or do not apply, repeated lengths, codings never
   * asked for) leaves the connection unfit for another request, even where the answer can be read.
   */
  readonly keepAlive: boolean
  readonly framing: Framing
}

const parseHead = (text: string, headRequest: boolean): Head | string => {
  const lines = text.split("\r\n")
  const statusLine = STATUS_LINE.exec(lines[0] ?? "")
  if (statusLine === null) return "the answer is not HTTP/1.x"
  if (lines.length - 1 > MAX_HEADER_LINES) return "the answer has too many header lines"
  const status = Number(statusLine[2])
  const headers: Array<readonly [string, string]> = []
  let retryAfter: string | null = null
  let closes = false
  let anomalous = false
  let transferEncoding: string | undefined
  let contentLength: string | undefined
  for (let i = 1; i < lines.length; i++) {
    const field = FIELD_LINE.exec(lines[i] ?? "")
    if (field === null) return "the answer has a malformed header line"
    const name = (field[1] ?? "").toLowerCase()
    const value = trimEnd(field[2] ?? "")
    headers.push([name, value])
    if (name === "retry-after") retryAfter = value
    else if (name === "connection") closes ||= value.toLowerCase().split(",").some((token) => token.trim() === "close")
    else if (name === "transfer-encoding") {
      transferEncoding = transferEncoding === undefined
        ? value.toLowerCase()
        : `${transferEncoding},${value.toLowerCase()}`
    } else if (name === "content-length") {
      // Repeated lengths must agree (RFC 9112 6.3); even then, a sound server sends one.
      const lengths = new Set(value.split(",").map((v) => v.trim()))
      const [only] = lengths
      if (
        lengths.size !== 1 || only === undefined || !DIGITS.test(only) ||
        (contentLength !== undefined && contentLength !== only)
      ) {
        return "the answer has an invalid Content-Length"
      }
      anomalous ||= contentLength !== undefined || value.includes(",")
      contentLength = only
    }
  }
  const keepAlive = statusLine[1] === "1" && !closes
  const hasLength = contentLength !== undefined && Number(contentLength) > 0
  const head = (framing: Framing, reusable: boolean): Head => ({
    status,
    headers,
    retryAfter,
    keepAlive: reusable && !anomalous,
    framing
  })
  // These never have a body (RFC 9112 6.3); one that announces a body leaves the connection in doubt.
  const announcesBody = hasLength || transferEncoding !== undefined
  if (status < 200) return head(NO_BODY, keepAlive && !announcesBody)
  // A HEAD answer's framing headers describe the body a GET would have had: it never has one.
  if (headRequest) return head(NO_BODY, keepAlive)
  if (status === 204 || status === 304) return head(NO_BODY, keepAlive && !announcesBody)
  if (transferEncoding !== undefined) {
    const codings = transferEncoding.split(",").map((c) => c.trim())
    // Chunked last frames the body (RFC 9112 6.3); anything beside it (a Content-Length, a coding never asked for) is not trusted again.
    if (codings.at(-1) === "chunked") {
      return head(CHUNKED, keepAlive && codings.length === 1 && contentLength === undefined)
    }
    return head(UNTIL_CLOSE, false)
  }
  if (contentLength !== undefined) return head({ _tag: "length", length: Number(contentLength) }, keepAlive)
  return head(UNTIL_CLOSE, false)
}

/**
 * One reader per connection; `reset` before each request. Its outcome never depends on where the
 * network cut the bytes (test/http-fuzz.test.ts checks it), except that bytes found after the
 * answer make it not reusable: those arriving later are caught by the connection, which then has
 * no exchange.
 */
export class ResponseReader {
  private kept: BodyKept = SNIPPET
  private headRequest = false
  private phase: Phase = "head"
  private pending: Buffer = Buffer.alloc(0)
  private head: Head | undefined
  /** An informational answer before this one was anomalous: the connection is not reused. */
  private tainted = false
  private remaining = 0
  private bodyBytes = 0
  private keptParts: Array<Buffer> = []
  private keptBytes = 0
  private trailerLines = 0
  private trailerBytes = 0

  /** Before each request: what of the body to keep, and whether the request is HEAD (its answer has no body). */
  reset(kept: BodyKept = SNIPPET, headRequest = false): void {
    this.kept = kept
    this.headRequest = headRequest
    this.phase = "head"
    this.pending = Buffer.alloc(0)
    this.head = undefined
    this.tainted = false
    this.remaining = 0
    this.bodyBytes = 0
    this.keptParts = []
    this.keptBytes = 0
    this.trailerLines = 0
    this.trailerBytes = 0
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
    return this.phase !== "head" || this.pending.length > 0 || this.tainted
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
        reusable: reusable && head.keepAlive && !this.tainted && this.pending.length === 0
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

  /**
   * Takes one CRLF-ended line off `pending`; undefined until it is complete. An overlong line is
   * refused as soon as it is certain, whether or not its end has arrived (a last byte CR may yet be
   * followed by its LF), so that the outcome does not depend on where the bytes were cut.
   */
  private line(): string | undefined | ReadEnd {
    const end = this.pending.indexOf(CRLF)
    if (end < 0) {
      const certain = this.pending.length - (this.pending[this.pending.length - 1] === 13 ? 1 : 0)
      return certain > MAX_LINE_BYTES ? malformed("the answer has an overlong chunk line") : undefined
    }
    if (end > MAX_LINE_BYTES) return malformed("the answer has an overlong chunk line")
    const text = this.pending.subarray(0, end).toString("latin1")
    this.pending = this.pending.subarray(end + 2)
    return text
  }

  /** One step of the state machine: an outcome ends the push; undefined means go on. */
  private step(): ReadOutcome | undefined {
    switch (this.phase) {
      case "head": {
        const end = this.pending.indexOf(HEAD_END)
        // Without its end, the head is certainly too long once it exceeds the limit by more than a partial "\r\n\r".
        if (end < 0) return this.pending.length > MAX_HEAD_BYTES + 3 ? malformed("the answer's head is too long") : MORE
        if (end > MAX_HEAD_BYTES) return malformed("the answer's head is too long")
        const head = parseHead(this.pending.subarray(0, end).toString("latin1"), this.headRequest)
        this.pending = this.pending.subarray(end + 4)
        if (typeof head === "string") return malformed(head)
        if (head.status < 200) {
          // An informational answer precedes the real one; 101 was never asked for.
          if (head.status === 101) return malformed("the receiver switched protocols")
          this.tainted ||= !head.keepAlive
          return undefined
        }
        this.head = head
        switch (head.framing._tag) {
          case "none":
            return this.answer(true)
          case "length":
            this.phase = "length"
            this.remaining = head.framing.length
            return this.remaining === 0 ? this.answer(true) : undefined
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
        if (this.pending[0] !== 13 || this.pending[1] !== 10) {
          return malformed("the answer has a chunk without its CRLF")
        }
        this.pending = this.pending.subarray(2)
        this.phase = "chunkSize"
        return undefined
      }
      case "trailers": {
        const line = this.line()
        if (line === undefined) return MORE
        if (typeof line !== "string") return line
        if (line === "") return this.answer(true)
        // Trailers are read past, never kept: bounded so that an endless stream of them ends the answer.
        this.trailerLines += 1
        this.trailerBytes += line.length + 2
        if (this.trailerLines > MAX_TRAILER_LINES || this.trailerBytes > MAX_TRAILER_BYTES) {
          return malformed("the answer has too many trailers")
        }
        return FIELD_LINE.test(line) ? undefined : malformed("the answer has a malformed trailer line")
      }
    }
  }
}

/**
 * The framing of HTTP/1.1 answers on kept-alive connections (src/Net/ResponseReader.ts): each
 * answer is fed whole and split at every byte, since the network may cut it anywhere.
 */
import { describe, expect, it } from "@effect/vitest"
import { type BodyKept, type ReadOutcome, ResponseReader, SNIPPET } from "../src/Net/ResponseReader.js"

/** An outcome as the tests compare it: the kept body as text, headers left out. */
const view = (outcome: ReadOutcome) =>
  outcome._tag === "Answer"
    ? {
      _tag: "Answer" as const,
      answer: {
        status: outcome.answer.status,
        retryAfter: outcome.answer.retryAfter,
        snippet: outcome.answer.body.toString("latin1"),
        reusable: outcome.answer.reusable
      }
    }
    : outcome

const reader = (kept: BodyKept = SNIPPET, headRequest = false) => {
  const r = new ResponseReader()
  r.reset(kept, headRequest)
  return r
}

/** Feeds `bytes` in pieces of `size` bytes; returns the first outcome other than More, or More. */
const feed = (r: ResponseReader, bytes: Buffer, size: number) => {
  for (let at = 0; at < bytes.length; at += size) {
    const outcome = r.push(bytes.subarray(at, at + size))
    if (outcome._tag !== "More") return view(outcome)
  }
  return view({ _tag: "More" })
}

/** The outcome of `text` for every piece size from 1 byte to whole, which must all agree. */
const readAllWays = (text: string, kept: BodyKept = SNIPPET, headRequest = false) => {
  const bytes = Buffer.from(text, "latin1")
  const whole = feed(reader(kept, headRequest), bytes, bytes.length)
  for (let size = 1; size < bytes.length; size++) expect(feed(reader(kept, headRequest), bytes, size)).toEqual(whole)
  return whole
}

/** Whether the connection may carry another request after `text`, or the Malformed message. */
const reusable = (text: string, headRequest = false) => {
  const outcome = readAllWays(text, SNIPPET, headRequest)
  return outcome._tag === "Answer"
    ? outcome.answer.reusable
    : outcome._tag === "Malformed"
    ? outcome.message
    : outcome._tag
}

describe("ResponseReader", () => {
  it("frames a Content-Length answer and keeps the connection", () => {
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nretry-after: 7\r\n\r\nhello")).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: "7", snippet: "hello", reusable: true }
    })
  })

  it("decodes a chunked answer with extensions and trailers, and keeps the connection", () => {
    const text =
      "HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nfail\r\n6\r\ned now\r\n0\r\nx-trailer: 1\r\n\r\n"
    expect(readAllWays(text)).toEqual({
      _tag: "Answer",
      answer: { status: 500, retryAfter: null, snippet: "failed now", reusable: true }
    })
  })

  it("skips informational answers, and 204 has no body", () => {
    expect(
      readAllWays(
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"
      )
    ).toEqual({
      _tag: "Answer",
      answer: { status: 204, retryAfter: null, snippet: "", reusable: true }
    })
  })

  it("does not keep a connection the receiver closes, an HTTP/1.0 one, or one with bytes past the answer", () => {
    expect(reusable("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\ncontent-length: 0\r\n\r\n")).toBe(false)
    expect(reusable("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n")).toBe(false)
    // Bytes arriving after the answer are caught by the connection itself (it has no exchange then).
    const extra = view(reader().push(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA")))
    expect(extra).toEqual({ _tag: "Answer", answer: { status: 200, retryAfter: null, snippet: "ok", reusable: false } })
    expect(reusable("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n")).toBe(false)
  })

  it("reads a body without length until the close, or until its snippet is full", () => {
    const open = reader()
    expect(open.push(Buffer.from("HTTP/1.1 202 Accepted\r\n\r\nsome"))).toEqual({ _tag: "More" })
    expect(view(open.closed())).toEqual({
      _tag: "Answer",
      answer: { status: 202, retryAfter: null, snippet: "some", reusable: false }
    })
    const long = reader()
    expect(view(long.push(Buffer.from(`HTTP/1.1 200 OK\r\n\r\n${"z".repeat(3000)}`)))).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "z".repeat(1024), reusable: false }
    })
  })

  it("keeps 1 KB of a long answer, drains a moderate one and gives up a huge one", () => {
    const moderate = readAllWays(`HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n${"y".repeat(5000)}`)
    expect(moderate).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "y".repeat(1024), reusable: true }
    })
    const huge = reader()
    expect(view(huge.push(Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n${"y".repeat(100_000)}`))))
      .toEqual({
        _tag: "Answer",
        answer: { status: 200, retryAfter: null, snippet: "y".repeat(1024), reusable: false }
      })
  })

  it("refuses what it cannot frame for certain", () => {
    const tag = (text: string) => {
      const outcome = reader().push(Buffer.from(text, "latin1"))
      return outcome._tag === "Malformed" ? outcome.message : outcome._tag
    }
    expect(tag("SSH-2.0-OpenSSH\r\n\r\n")).toBe("the answer is not HTTP/1.x")
    expect(tag("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd")).toBe(
      "the answer has an invalid Content-Length"
    )
    expect(tag("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n")).toBe("the answer has an invalid Content-Length")
    expect(tag("HTTP/1.1 200 OK\r\nx: 1\r\n folded\r\n\r\n")).toBe("the answer has a malformed header line")
    expect(tag("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n")).toBe(
      "the answer has an invalid chunk size"
    )
    expect(tag("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokXX")).toBe(
      "the answer has a chunk without its CRLF"
    )
    expect(tag("HTTP/1.1 101 Switching Protocols\r\n\r\n")).toBe("the receiver switched protocols")
    expect(tag(`HTTP/1.1 200 OK\r\nx: ${"a".repeat(20_000)}`)).toBe("the answer's head is too long")
    const cut = reader()
    cut.push(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"))
    expect(cut.started()).toBe(true)
    expect(cut.closed()).toEqual({
      _tag: "Malformed",
      message: "the receiver closed the connection before its answer was complete"
    })
    expect(reader().started()).toBe(false)
  })

  it("keeps every header, and the whole body when asked, refusing one longer than allowed", () => {
    const whole: BodyKept = { bytes: 4096, whole: true }
    const text =
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nWWW-Authenticate: Bearer\r\ntransfer-encoding: chunked\r\n\r\n800\r\n${
        "a".repeat(2048)
      }\r\n400\r\n${"b".repeat(1024)}\r\n0\r\n\r\n`
    const outcome = reader(whole).push(Buffer.from(text))
    expect(outcome._tag === "Answer" ? outcome.answer : outcome).toEqual({
      status: 400,
      headers: [["content-type", "application/json"], ["www-authenticate", "Bearer"], ["transfer-encoding", "chunked"]],
      retryAfter: null,
      body: Buffer.from("a".repeat(2048) + "b".repeat(1024)),
      reusable: true
    })
    expect(readAllWays(`HTTP/1.1 200 OK\r\n\r\n${"c".repeat(2000)}`, whole)).toEqual({ _tag: "More" })
    const untilClose = reader(whole)
    untilClose.push(Buffer.from(`HTTP/1.1 200 OK\r\n\r\n${"c".repeat(2000)}`))
    expect(view(untilClose.closed())).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "c".repeat(2000), reusable: false }
    })
    const small: BodyKept = { bytes: 10, whole: true }
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n0123456789X", small)).toEqual({
      _tag: "Malformed",
      message: "the answer's body is longer than 10 bytes"
    })
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n0123456789", small)).toMatchObject({
      _tag: "Answer",
      answer: { snippet: "0123456789", reusable: true }
    })
  })

  it("refuses header lines no sound server writes: whitespace before the colon, obs-fold, NUL, bare CR or LF, a name not a token", () => {
    const malformedLine = "the answer has a malformed header line"
    for (
      const line of [
        "content-length : 2",
        "content-length\t: 2",
        " x: 1",
        "x y: 1",
        "x: a\u0000b",
        "x: a\rb",
        "x: a\nb",
        "x\u0000: 1",
        ": 1",
        "(x): 1",
        "x"
      ]
    ) {
      expect(reusable(`HTTP/1.1 200 OK\r\n${line}\r\ncontent-length: 2\r\n\r\nok`)).toBe(malformedLine)
    }
    expect(reusable("HTTP/1.1 200 OK\r\nx: 1\r\n\tfolded\r\ncontent-length: 0\r\n\r\n")).toBe(malformedLine)
    // Values keep obs-text and inner spaces; the spaces around them go.
    const outcome = readAllWays("HTTP/1.1 200 OK\r\nx-name:  caf\u00e9 au lait \t\r\ncontent-length: 0\r\n\r\n")
    expect(outcome._tag === "Answer" && outcome.answer.reusable).toBe(true)
    const answer = reader().push(
      Buffer.from("HTTP/1.1 200 OK\r\nx-name:  caf\u00e9 au lait \t\r\ncontent-length: 0\r\n\r\n", "latin1")
    )
    expect(answer._tag === "Answer" ? answer.answer.headers : answer).toEqual([["x-name", "caf\u00e9 au lait"], [
      "content-length",
      "0"
    ]])
  })

  it("refuses a status line that is not HTTP/1.x with a three-digit code, and a head with too many lines", () => {
    for (
      const line of [
        "HTTP/1.1 99 Low",
        "HTTP/1.1 2000 OK",
        "HTTP/2 200 OK",
        "HTTP/1.1  200 OK",
        "HTTP/1.1 200 O\u0000K",
        "http/1.1 200 OK",
        "HTTP/1.1 200 OK\r"
      ]
    ) {
      expect(reusable(`${line}\r\ncontent-length: 0\r\n\r\n`)).toBe("the answer is not HTTP/1.x")
    }
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `x-${i}: ${i}\r\n`).join("")
    expect(reusable(`HTTP/1.1 200 OK\r\n${lines(99)}content-length: 0\r\n\r\n`)).toBe(true)
    expect(reusable(`HTTP/1.1 200 OK\r\n${lines(100)}content-length: 0\r\n\r\n`)).toBe(
      "the answer has too many header lines"
    )
    // A head past 16 KB is refused whether it arrives whole or byte by byte.
    expect(reusable(`HTTP/1.1 200 OK\r\nx: ${"a".repeat(16_400)}\r\ncontent-length: 0\r\n\r\n`)).toBe(
      "the answer's head is too long"
    )
  })

  it("reads an answer whose framing is in doubt, but never keeps its connection", () => {
    // 204 and 304 have no body; one that announces a body, or a 1xx that does, leaves the connection in doubt.
    expect(readAllWays("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n")).toEqual({
      _tag: "Answer",
      answer: { status: 204, retryAfter: null, snippet: "", reusable: false }
    })
    expect(reusable("HTTP/1.1 304 Not Modified\r\ncontent-length: 120\r\n\r\n")).toBe(false)
    expect(reusable("HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n")).toBe(false)
    expect(reusable("HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")).toBe(true)
    expect(reusable("HTTP/1.1 100 Continue\r\ncontent-length: 4\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"))
      .toBe(false)
    expect(
      reusable(
        "HTTP/1.1 103 Early Hints\r\ntransfer-encoding: chunked\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
      )
    ).toBe(false)
    // Conflicting or unusual framing: Transfer-Encoding with a Content-Length, codings never asked for, repeated lengths.
    expect(reusable("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")).toBe(false)
    expect(readAllWays("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\nzz\r\n0\r\n\r\n")).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "zz", reusable: false }
    })
    expect(reusable("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"))
      .toBe(false)
    const gzip = reader()
    expect(gzip.push(Buffer.from("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\nzz"))).toEqual({ _tag: "More" })
    expect(view(gzip.closed())).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "zz", reusable: false }
    })
    expect(reusable("HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok")).toBe(false)
    expect(reusable("HTTP/1.1 200 OK\r\ncontent-length: 2, 2\r\n\r\nok")).toBe(false)
    expect(reusable("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")).toBe(true)
  })

  it("bounds the trailers in count and in size, and refuses a malformed one", () => {
    const chunked = (trailers: string) =>
      `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n${trailers}\r\n`
    const trailers = (n: number, size = 1) =>
      Array.from({ length: n }, (_, i) => `x-${i}: ${"v".repeat(size)}\r\n`).join("")
    expect(reusable(chunked(trailers(32)))).toBe(true)
    expect(reusable(chunked(trailers(33)))).toBe("the answer has too many trailers")
    // Eight lines of just over 1 KB each pass 8 KB in all.
    expect(reusable(chunked(trailers(7, 1000)))).toBe(true)
    expect(reusable(chunked(trailers(9, 1000)))).toBe("the answer has too many trailers")
    expect(reusable(chunked(`x-1: ${"v".repeat(5000)}\r\n`))).toBe("the answer has an overlong chunk line")
    expect(reusable(chunked("bad trailer\r\n"))).toBe("the answer has a malformed trailer line")
    expect(reusable(chunked("x : 1\r\n"))).toBe("the answer has a malformed trailer line")
  })

  it("ends a HEAD answer with its head, whatever body it announces, and keeps the connection", () => {
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n", SNIPPET, true)).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "", reusable: true }
    })
    expect(reusable("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", true)).toBe(true)
    expect(reusable("HTTP/1.1 200 OK\r\n\r\n", true)).toBe(true)
    // The same head for a GET announces a body still to come.
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 50\r\n\r\n")).toEqual({ _tag: "More" })
  })
})

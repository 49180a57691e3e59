/**
 * The framing of receivers' answers on kept-alive connections (src/Events/ResponseReader.ts): each
 * answer is fed whole and split at every byte, since the network may cut it anywhere.
 */
import { describe, expect, it } from "@effect/vitest"
import { type ReadOutcome, ResponseReader } from "../src/Events/ResponseReader.js"

/** Feeds `text` in pieces of `size` bytes; returns the first outcome other than More, or More. */
const feed = (reader: ResponseReader, bytes: Buffer, size: number): ReadOutcome => {
  for (let at = 0; at < bytes.length; at += size) {
    const outcome = reader.push(bytes.subarray(at, at + size))
    if (outcome._tag !== "More") return outcome
  }
  return { _tag: "More" }
}

/** The outcome of `text` for every piece size from 1 byte to whole, which must all agree. */
const readAllWays = (text: string): ReadOutcome => {
  const bytes = Buffer.from(text, "latin1")
  const whole = feed(new ResponseReader(), bytes, bytes.length)
  for (let size = 1; size < bytes.length; size++) expect(feed(new ResponseReader(), bytes, size)).toEqual(whole)
  return whole
}

describe("ResponseReader", () => {
  it("frames a Content-Length answer and keeps the connection", () => {
    expect(readAllWays("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nretry-after: 7\r\n\r\nhello")).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: "7", snippet: "hello", reusable: true }
    })
  })

  it("decodes a chunked answer with extensions and trailers, and keeps the connection", () => {
    const text = "HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n4;x=1\r\nfail\r\n6\r\ned now\r\n0\r\nx-trailer: 1\r\n\r\n"
    expect(readAllWays(text)).toEqual({ _tag: "Answer", answer: { status: 500, retryAfter: null, snippet: "failed now", reusable: true } })
  })

  it("skips informational answers, and 204 has no body", () => {
    expect(readAllWays("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n")).toEqual({
      _tag: "Answer",
      answer: { status: 204, retryAfter: null, snippet: "", reusable: true }
    })
  })

  it("does not keep a connection the receiver closes, an HTTP/1.0 one, or one with bytes past the answer", () => {
    const reusable = (text: string) => {
      const outcome = readAllWays(text)
      return outcome._tag === "Answer" ? outcome.answer.reusable : outcome._tag
    }
    expect(reusable("HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\ncontent-length: 0\r\n\r\n")).toBe(false)
    expect(reusable("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n")).toBe(false)
    // Bytes arriving after the answer are caught by the connection itself (it has no exchange then).
    const extra = new ResponseReader().push(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA"))
    expect(extra).toEqual({ _tag: "Answer", answer: { status: 200, retryAfter: null, snippet: "ok", reusable: false } })
    expect(reusable("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n0\r\n\r\n")).toBe(false)
  })

  it("reads a body without length until the close, or until its snippet is full", () => {
    const reader = new ResponseReader()
    expect(reader.push(Buffer.from("HTTP/1.1 202 Accepted\r\n\r\nsome"))).toEqual({ _tag: "More" })
    expect(reader.closed()).toEqual({ _tag: "Answer", answer: { status: 202, retryAfter: null, snippet: "some", reusable: false } })
    const long = new ResponseReader()
    expect(long.push(Buffer.from(`HTTP/1.1 200 OK\r\n\r\n${"z".repeat(3000)}`))).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "z".repeat(1024), reusable: false }
    })
  })

  it("keeps 1 KB of a long answer, drains a moderate one and gives up a huge one", () => {
    const moderate = readAllWays(`HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\n${"y".repeat(5000)}`)
    expect(moderate).toEqual({ _tag: "Answer", answer: { status: 200, retryAfter: null, snippet: "y".repeat(1024), reusable: true } })
    const huge = new ResponseReader()
    expect(huge.push(Buffer.from(`HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n${"y".repeat(100_000)}`))).toEqual({
      _tag: "Answer",
      answer: { status: 200, retryAfter: null, snippet: "y".repeat(1024), reusable: false }
    })
  })

  it("refuses what it cannot frame for certain", () => {
    const tag = (text: string) => {
      const outcome = new ResponseReader().push(Buffer.from(text, "latin1"))
      return outcome._tag === "Malformed" ? outcome.message : outcome._tag
    }
    expect(tag("SSH-2.0-OpenSSH\r\n\r\n")).toBe("the answer is not HTTP/1.x")
    expect(tag("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd")).toBe("the answer has an invalid Content-Length")
    expect(tag("HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n")).toBe("the answer has an invalid Content-Length")
    expect(tag("HTTP/1.1 200 OK\r\nx: 1\r\n folded\r\n\r\n")).toBe("the answer has a malformed header line")
    expect(tag("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n")).toBe("the answer has an invalid chunk size")
    expect(tag("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokXX")).toBe("the answer has a chunk without its CRLF")
    expect(tag("HTTP/1.1 101 Switching Protocols\r\n\r\n")).toBe("the receiver switched protocols")
    expect(tag(`HTTP/1.1 200 OK\r\nx: ${"a".repeat(20_000)}`)).toBe("the answer's head is too long")
    const cut = new ResponseReader()
    cut.push(Buffer.from("HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"))
    expect(cut.started()).toBe(true)
    expect(cut.closed()).toEqual({ _tag: "Malformed", message: "the receiver closed the connection before its answer was complete" })
    expect(new ResponseReader().started()).toBe(false)
  })
})

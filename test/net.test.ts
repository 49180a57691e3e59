/**
 * The small pieces of src/Net shared by Graph calls and webhook deliveries: the one request writer
 * (what it writes, what it refuses) and the one deadline (a timer that also follows a parent signal,
 * driven here by a fake clock). The Retry-After reader is tested with the retry policy
 * (test/dispatcher.test.ts); the writer, the reader and the pool on the wire in test/sender.test.ts,
 * test/graph-pool.test.ts and test/http-fuzz.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "@effect/vitest"
import { Deadline, DeadlineExceeded } from "../src/Net/Deadline.js"
import { checkHeaders, HeaderRefused, requestBytes } from "../src/Net/RequestHead.js"

const text = (bytes: Buffer | HeaderRefused) => (bytes instanceof HeaderRefused ? bytes : bytes.toString("latin1"))
const refusal = (
  bytes: Buffer | HeaderRefused | undefined
) => (bytes instanceof HeaderRefused ? bytes.message : "written")

describe("the request writer", () => {
  it("writes the request line, the Host, the caller's headers in order, the length and the body", () => {
    expect(
      text(
        requestBytes("POST", "/v23.0/1/messages?x=1", "graph.test", {
          authorization: "Bearer t",
          "content-type": "application/json"
        }, "{\"a\":\"é\"}")
      )
    )
      .toBe(
        "POST /v23.0/1/messages?x=1 HTTP/1.1\r\nhost: graph.test\r\nauthorization: Bearer t\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n{\"a\":\"\u00c3\u00a9\"}"
      )
    expect(text(requestBytes("GET", "/", "[::1]:8080", { accept: "*/*" }, new Uint8Array(0)))).toBe(
      "GET / HTTP/1.1\r\nhost: [::1]:8080\r\naccept: */*\r\n\r\n"
    )
    expect(text(requestBytes("HEAD", "/x", "h.test", {}, ""))).toBe("HEAD /x HTTP/1.1\r\nhost: h.test\r\n\r\n")
    // Other methods say their empty body's length; bytes are written as they are.
    expect(text(requestBytes("DELETE", "/x", "h.test", {}, ""))).toBe(
      "DELETE /x HTTP/1.1\r\nhost: h.test\r\ncontent-length: 0\r\n\r\n"
    )
    expect(text(requestBytes("PUT", "/x", "h.test", {}, Uint8Array.of(0, 255)))).toBe(
      "PUT /x HTTP/1.1\r\nhost: h.test\r\ncontent-length: 2\r\n\r\n\u0000\u00ff"
    )
  })

  it("writes the framing headers itself, whatever the caller's say", () => {
    const own = {
      Host: "evil.test",
      "CONTENT-LENGTH": "99",
      Connection: "close",
      "transfer-encoding": "chunked",
      "x-kept": "1"
    }
    expect(text(requestBytes("POST", "/", "h.test", own, "ab"))).toBe(
      "POST / HTTP/1.1\r\nhost: h.test\r\nx-kept: 1\r\ncontent-length: 2\r\n\r\nab"
    )
  })

  it("keeps values of visible ASCII, spaces, tabs and obs-text", () => {
    expect(
      refusal(requestBytes("GET", "/", "h", { "x-Any_name.1!#$%&'*+^`|~": "a b\tc \u00e9\u00ff !~", empty: "" }, ""))
    ).toBe("written")
  })

  it("refuses a header, method, target or host that could break the request, as a value and before anything is written", () => {
    const refusedHeaders: ReadonlyArray<[Record<string, string>, string]> = [
      [{ "x-a": "1\r\nx-injected: 1" }, "x-a"],
      [{ "x-a": "1\n" }, "x-a"],
      [{ "x-a": "1\r" }, "x-a"],
      [{ "x-a": "1\u0000" }, "x-a"],
      [{ "x-a": "\u0001" }, "x-a"],
      [{ "x-a": "\u007f" }, "x-a"],
      [{ "x-a": "\u0100" }, "x-a"],
      [{ "x-a": "\u20ac" }, "x-a"],
      [{ "x a": "1" }, "x a"],
      [{ "x-a ": "1" }, "x-a "],
      [{ "x:a": "1" }, "x:a"],
      [{ "": "1" }, ""],
      [{ "x\u00e9": "1" }, "x\u00e9"],
      [{ "(x)": "1" }, "(x)"],
      [{ "x\r\ny": "1" }, "x\r\ny"]
    ]
    for (const [headers, name] of refusedHeaders) {
      expect(refusal(requestBytes("POST", "/", "h.test", headers, "{}"))).toBe(
        `the header ${JSON.stringify(name)} cannot be sent`
      )
      expect(checkHeaders(headers)?.message).toBe(`the header ${JSON.stringify(name)} cannot be sent`)
    }
    expect(checkHeaders({ authorization: "Bearer t" })).toBeUndefined()
    expect(refusal(requestBytes("GET /x HTTP/1.1\r\n", "/", "h.test", {}, ""))).toBe(
      "the method \"GET /x HTTP/1.1\\r\\n\" cannot be sent"
    )
    expect(refusal(requestBytes("POST", "/a b", "h.test", {}, ""))).toBe("the request target \"/a b\" cannot be sent")
    expect(refusal(requestBytes("POST", "", "h.test", {}, ""))).toBe("the request target \"\" cannot be sent")
    expect(refusal(requestBytes("POST", "/", "h.test\r\nx: 1", {}, ""))).toBe(
      "the host \"h.test\\r\\nx: 1\" cannot be sent"
    )
    expect(refusal(requestBytes("POST", "/", "", {}, ""))).toBe("the host \"\" cannot be sent")
  })
})

describe("the deadline", () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it("aborts its signal when the time is up, and says it timed out", () => {
    const deadline = new Deadline(1000)
    vi.advanceTimersByTime(999)
    expect(deadline.signal.aborted).toBe(false)
    vi.advanceTimersByTime(1)
    expect([deadline.signal.aborted, deadline.timedOut, deadline.signal.reason instanceof DeadlineExceeded]).toEqual([
      true,
      true,
      true
    ])
    const thrown = new Error("socket closed")
    expect(deadline.cause(thrown)).toBe(deadline.signal.reason)
    expect(vi.getTimerCount()).toBe(0)
  })

  it("follows its parent's abort, with the parent's reason, which is not a timeout", () => {
    const parent = new AbortController()
    const deadline = new Deadline(1000, parent.signal)
    parent.abort("shutdown")
    expect([deadline.signal.aborted, deadline.signal.reason, deadline.timedOut]).toEqual([true, "shutdown", false])
    const thrown = new Error("aborted")
    expect(deadline.cause(thrown)).toBe(thrown)
    // Its timer went with the abort.
    expect(vi.getTimerCount()).toBe(0)
    const late = new Deadline(1000, parent.signal)
    expect([late.signal.aborted, late.signal.reason, vi.getTimerCount()]).toEqual([true, "shutdown", 0])
  })

  it("once settled, neither its timer nor its parent aborts it, and it leaves no listener behind", () => {
    const parent = new AbortController()
    const listeners = vi.spyOn(parent.signal, "removeEventListener")
    const deadline = new Deadline(1000, parent.signal)
    deadline.settle()
    expect(vi.getTimerCount()).toBe(0)
    expect(listeners).toHaveBeenCalledWith("abort", expect.any(Function))
    vi.advanceTimersByTime(5000)
    parent.abort()
    expect(deadline.signal.aborted).toBe(false)
  })

  it("is aborted at once by an interruption; without a time only that or the parent ends it", () => {
    const deadline = new Deadline(undefined)
    expect(vi.getTimerCount()).toBe(0)
    deadline.abort()
    expect([deadline.signal.aborted, deadline.timedOut]).toEqual([true, false])
  })
})

/**
 * Fuzzing the hand-written HTTP/1.1 client (src/Net/ResponseReader.ts, src/Net/Pool.ts, src/Net/Connection.ts) with
 * mutated valid answers and random bytes, from a fixed seed and in a bounded count (a second or two):
 *
 * - the reader's every outcome is More, Answer or Malformed (it never throws), an answer keeps no
 *   more of the body than asked, and the outcome does not depend on where the bytes were cut;
 * - the pool, against a local TCP server writing the same bytes in random pieces, never hands a
 *   connection back after an anomaly: the server sees that connection closed and the next request
 *   arrives on a new one, while a sound answer's connection carries the next request.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Socket, TCPSocketListener } from "bun"
import { originOf } from "../src/Net/Connection.js"
import { Deadline } from "../src/Net/Deadline.js"
import { makeKeepAlivePool, type PoolOutcome } from "../src/Net/Pool.js"
import { HeaderRefused, requestBytes } from "../src/Net/RequestHead.js"
import { type BodyKept, type ReadEnd, type ReadOutcome, ResponseReader, SNIPPET } from "../src/Net/ResponseReader.js"

const SEED = 0x5eed_2026
const READER_CASES = 4_000
const POOL_CASES = 300

/** mulberry32: a small seeded generator, so that a failure can be replayed. */
const generator = (seed: number) => {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const below = (n: number) => Math.floor(next() * n)
  const pick = <A>(items: ReadonlyArray<A>): A => {
    const item = items[below(items.length)]
    if (item === undefined) throw new Error("nothing to pick from")
    return item
  }
  return { next, below, pick }
}
type Random = ReturnType<typeof generator>

const CORPUS: ReadonlyArray<string> = [
  "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
  "HTTP/1.1 204 No Content\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n",
  "HTTP/1.1 500 Internal\r\ntransfer-encoding: chunked\r\n\r\n4;x=1\r\nfail\r\n6\r\ned now\r\n0\r\nx-trailer: 1\r\n\r\n",
  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"id\":\"1\"}\n",
  "HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\ncontent-length: 0\r\n\r\n",
  "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\nbye",
  "HTTP/1.0 200 OK\r\n\r\nuntil the close",
  "HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\n\r\n",
  `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n${"a\r\n0123456789\r\n".repeat(3)}0\r\n\r\n`,
  `HTTP/1.1 200 OK\r\ncontent-length: 1500\r\n\r\n${"x".repeat(1500)}`,
  "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nwww-authenticate: OAuth \"x\"\r\ncontent-length: 24\r\n\r\n{\"error\":{\"code\":100}}\r\n"
]

/** Bytes and fragments that matter to HTTP/1.1 framing. */
const INTERESTING: ReadonlyArray<string> = [
  "\r\n",
  "\n",
  "\r",
  " ",
  "\t",
  ":",
  "\u0000",
  ",",
  ";",
  "0",
  "9",
  "ff",
  "-1",
  "\r\n\r\n",
  "\u00ff",
  "\u007f",
  "content-length: 5\r\n",
  "Content-Length: 0\r\n",
  "content-length : 2\r\n",
  "transfer-encoding: chunked\r\n",
  "transfer-encoding: gzip, chunked\r\n",
  "connection: close\r\n",
  " folded\r\n",
  "HTTP/1.1 200 OK\r\n",
  "HTTP/1.1 100 Continue\r\n\r\n",
  "HTTP/1.1 204 No Content\r\n",
  "x-trailer: 1\r\n",
  "0\r\n\r\n"
]

const latin1 = (text: string) => Buffer.from(text, "latin1")

/** One to four random edits of a valid answer. */
const mutate = (random: Random, original: Buffer): Buffer => {
  let bytes = original
  const edits = 1 + random.below(4)
  for (let edit = 0; edit < edits; edit++) {
    const at = random.below(bytes.length + 1)
    switch (random.below(6)) {
      case 0: {
        const copy = Buffer.from(bytes)
        if (copy.length > 0) copy[Math.min(at, copy.length - 1)] = random.below(256)
        bytes = copy
        break
      }
      case 1:
        bytes = Buffer.concat([bytes.subarray(0, at), latin1(random.pick(INTERESTING)), bytes.subarray(at)])
        break
      case 2:
        bytes = Buffer.concat([bytes.subarray(0, at), bytes.subarray(Math.min(bytes.length, at + 1 + random.below(8)))])
        break
      case 3: {
        const end = Math.min(bytes.length, at + 1 + random.below(40))
        bytes = Buffer.concat([bytes.subarray(0, end), bytes.subarray(at, end), bytes.subarray(end)])
        break
      }
      case 4:
        bytes = bytes.subarray(0, at)
        break
      case 5:
        bytes = Buffer.concat([bytes, latin1(random.pick(CORPUS))])
        break
    }
  }
  return bytes
}

/** Random bytes, half of them behind a status line so that the header parsing is reached. */
const noise = (random: Random): Buffer => {
  const bytes = Buffer.alloc(random.below(300))
  for (let i = 0; i < bytes.length; i++) {
    bytes[i] = random.next() < 0.2
      ? random.pick([10, 13, 32, 58, 0, 48])
      : random.below(256)
  }
  return random.next() < 0.5 ? Buffer.concat([latin1("HTTP/1.1 200 OK\r\n"), bytes]) : bytes
}

interface Case {
  readonly bytes: Buffer
  readonly kept: BodyKept
  readonly headRequest: boolean
}

const SMALL_WHOLE: BodyKept = { bytes: 256, whole: true }

/** A sound answer, one mutated, or noise. */
const caseBytes = (random: Random): Buffer => {
  const roll = random.next()
  if (roll < 0.15) return latin1(random.pick(CORPUS))
  return roll < 0.85 ? mutate(random, latin1(random.pick(CORPUS))) : noise(random)
}

const makeCase = (random: Random): Case => ({
  bytes: caseBytes(random),
  kept: random.next() < 0.5 ? SNIPPET : SMALL_WHOLE,
  headRequest: random.next() < 0.15
})

/** Pieces of `bytes` cut at random places (at least one, possibly empty). */
const pieces = (random: Random, bytes: Buffer): Array<Buffer> => {
  const cuts = Array.from({ length: random.below(6) }, () => random.below(bytes.length + 1)).sort((a, b) => a - b)
  const parts: Array<Buffer> = []
  let from = 0
  for (const cut of [...cuts, bytes.length]) {
    parts.push(bytes.subarray(from, cut))
    from = cut
  }
  return parts
}

const TAGS = new Set(["More", "Answer", "Malformed"])

/** Feeds the pieces; the first outcome other than More, or None when all were More. */
const feed = (reader: ResponseReader, parts: ReadonlyArray<Buffer>): ReadEnd | { readonly _tag: "None" } => {
  for (const part of parts) {
    const outcome: ReadOutcome = reader.push(part)
    expect(TAGS.has(outcome._tag)).toBe(true)
    if (outcome._tag !== "More") return outcome
  }
  return { _tag: "None" }
}

/** What a case reads to, all at once: the outcome, or undefined when the reader wants more. */
const expected = (c: Case): ReadEnd | undefined => {
  const reader = new ResponseReader()
  reader.reset(c.kept, c.headRequest)
  const outcome = feed(reader, [c.bytes])
  return outcome._tag === "None" ? undefined : outcome
}

/** An outcome as compared across cuts: all of it but whether the connection is reusable. */
const comparable = (outcome: ReadEnd) =>
  outcome._tag === "Malformed"
    ? outcome
    : {
      status: outcome.answer.status,
      headers: outcome.answer.headers,
      retryAfter: outcome.answer.retryAfter,
      body: outcome.answer.body.toString("latin1")
    }

describe("the response reader, fuzzed", () => {
  it("never throws, keeps no more than asked, and reads the same wherever the bytes are cut", () => {
    const random = generator(SEED)
    const tally = { Answer: 0, Malformed: 0, reusable: 0 }
    for (let n = 0; n < READER_CASES; n++) {
      const c = makeCase(random)
      const whole = new ResponseReader()
      whole.reset(c.kept, c.headRequest)
      const wholeFed = feed(whole, [c.bytes])
      const wholeEnd = wholeFed._tag === "None" ? whole.closed() : wholeFed
      const cut = new ResponseReader()
      cut.reset(c.kept, c.headRequest)
      const cutFed = feed(cut, pieces(random, c.bytes))
      const cutEnd = cutFed._tag === "None" ? cut.closed() : cutFed
      expect(["Answer", "Malformed"]).toContain(wholeEnd._tag)
      expect(comparable(cutEnd), `case ${n}: ${JSON.stringify(c.bytes.toString("latin1"))}`).toEqual(
        comparable(wholeEnd)
      )
      if (wholeEnd._tag === "Answer" && cutEnd._tag === "Answer") {
        const { status, body, reusable } = wholeEnd.answer
        expect(Number.isInteger(status) && status >= 200 && status <= 999).toBe(true)
        expect(body.length).toBeLessThanOrEqual(c.kept.bytes)
        if (c.headRequest) expect(body.length).toBe(0)
        // Cut short of bytes that follow the answer, the pieces may still find it reusable; never the other way.
        if (reusable) expect(cutEnd.answer.reusable).toBe(true)
        tally.reusable += reusable ? 1 : 0
      }
      tally[wholeEnd._tag] += 1
    }
    // The corpus and its mutations reach every outcome, not only refusals.
    expect(tally.Answer).toBeGreaterThan(READER_CASES / 10)
    expect(tally.Malformed).toBeGreaterThan(READER_CASES / 10)
    expect(tally.reusable).toBeGreaterThan(READER_CASES / 50)
  })
})

interface FuzzServer {
  readonly port: number
  /** The connection each request arrived on, in order. */
  readonly requests: Array<number>
  readonly whenClosed: (connection: number) => Promise<void>
  readonly stop: () => void
}

/**
 * A TCP server answering `GET /case/{n}` with case n's bytes, written in random pieces. When the
 * case reads to nothing complete, it closes the connection after them (the client then frames what
 * it has); otherwise it leaves it open, for the client to keep or close.
 */
const fuzzServer = (cases: ReadonlyArray<Case>, random: Random): FuzzServer => {
  const requests: Array<number> = []
  const closed = new Set<number>()
  const waiters = new Map<number, () => void>()
  let connections = 0
  const pending = new Map<Socket<{ id: number }>, Buffer>()
  const listener: TCPSocketListener<{ id: number }> = Bun.listen<{ id: number }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open: (socket) => {
        socket.data = { id: connections++ }
      },
      data: (socket, chunk) => {
        let buffer = Buffer.concat([pending.get(socket) ?? Buffer.alloc(0), chunk])
        for (let end = buffer.indexOf("\r\n\r\n"); end >= 0; end = buffer.indexOf("\r\n\r\n")) {
          const head = buffer.subarray(0, end).toString("latin1")
          buffer = buffer.subarray(end + 4)
          requests.push(socket.data.id)
          const c = cases[Number(/^[A-Z]+ \/case\/(\d+) /.exec(head)?.[1])]
          if (c === undefined) return void socket.end()
          for (const part of pieces(random, c.bytes)) socket.write(part)
          if (expected(c) === undefined) socket.end()
        }
        pending.set(socket, buffer)
      },
      close: (socket) => {
        pending.delete(socket)
        closed.add(socket.data.id)
        waiters.get(socket.data.id)?.()
      }
    }
  })
  return {
    port: listener.port,
    requests,
    whenClosed: (
      connection
    ) => (closed.has(connection) ? Promise.resolve() : new Promise((resolve) => waiters.set(connection, resolve))),
    stop: () => listener.stop(true)
  }
}

/** Fails after `ms` if `promise` has not settled: a safety net, never what a test waits for. */
const within = <A>(promise: Promise<A>, ms: number, what: string): Promise<A> =>
  Promise.race([
    promise,
    new Promise<A>((_, reject) =>
      setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms).unref()
    )
  ])

describe("the kept-alive pool, fuzzed over TCP", () => {
  it("never hands a connection back after an anomaly: it is closed, and the next request opens a new one", async () => {
    const random = generator(SEED + 1)
    const cases = Array.from({ length: POOL_CASES }, () => makeCase(random))
    const server = fuzzServer(cases, random)
    // The idle sweep never runs (its timer is never called): a connection closes only because the pool found it unfit.
    const pool = makeKeepAlivePool({
      maxIdlePerOrigin: 4,
      maxPerOrigin: 4,
      timers: { now: () => 0, every: () => () => undefined }
    })
    const origin = originOf(new URL(`http://127.0.0.1:${server.port}/`))
    const tally = { kept: 0, closed: 0 }
    try {
      for (let n = 0; n < cases.length; n++) {
        const c = cases[n]
        if (c === undefined) continue
        const bytes = requestBytes(c.headRequest ? "HEAD" : "GET", `/case/${n}`, `127.0.0.1:${server.port}`, {}, "")
        if (bytes instanceof HeaderRefused) throw bytes
        const deadline = new Deadline(5_000)
        const outcome: PoolOutcome = await pool.request({
          origin,
          bytes,
          resendable: false,
          headRequest: c.headRequest,
          kept: c.kept,
          signal: deadline.signal
        })
        deadline.settle()
        const what = `case ${n}: ${JSON.stringify(c.bytes.toString("latin1"))}`
        expect(["Answer", "Malformed", "Unreachable"], what).toContain(outcome._tag)
        const connection = server.requests[n]
        expect(connection, what).toBeDefined()
        const sound = expected(c)
        if (sound?._tag === "Answer" && sound.answer.reusable) {
          // A sound answer: its connection carries the next request.
          expect(outcome._tag === "Answer" && outcome.answer.reusable, what).toBe(true)
          tally.kept += 1
          continue
        }
        // Anything else: the connection is closed (by the pool, or by the server after an incomplete answer) ...
        await within(server.whenClosed(connection ?? -1), 2_000, `the close of connection ${connection} (${what})`)
        tally.closed += 1
      }
      // ... and every request after an anomaly went on a new connection, every other on the same one.
      for (let n = 1; n < cases.length; n++) {
        const before = cases[n - 1]
        if (before === undefined) continue
        const sound = expected(before)
        const sameConnection = server.requests[n] === server.requests[n - 1]
        expect(sameConnection, `request ${n} after case ${n - 1}: ${JSON.stringify(before.bytes.toString("latin1"))}`)
          .toBe(
            sound?._tag === "Answer" && sound.answer.reusable
          )
      }
      expect(tally.kept).toBeGreaterThan(POOL_CASES / 50)
      expect(tally.closed).toBeGreaterThan(POOL_CASES / 2)
    } finally {
      pool.close()
      server.stop()
    }
  })
})

/**
 * HTTP/1.1 exchanges over kept-alive connections, pooled per origin (scheme, address, port and the
 * name a certificate must carry), on `Bun.connect`. Bun's fetch parks at most 64 idle sockets in its
 * pool and closes every other connection after its answer, so past 64 requests in flight most of
 * them opened a new connection (and TLS session) and left a socket in TIME_WAIT; here a connection
 * is kept for as long as its server keeps it. TLS connections verify the chain and the host name
 * before a byte of the request is written. Idle connections do not keep the process alive.
 *
 * Connections to one origin are capped (HUB_MAX_CONNECTIONS_PER_ORIGIN): at the cap a request waits,
 * first come first served, for a connection to come back or to close, for as long as its own signal
 * allows. A connection counts against the cap from the moment it is asked for until its socket is
 * gone (a connect that outlives its request's deadline keeps its place until it ends), so the
 * sockets open to an origin never exceed the cap.
 */
import type { Socket } from "bun"
import { isIP } from "node:net"
import { checkServerIdentity } from "node:tls"
import { type BodyKept, type ReadEnd, type ReaderAnswer, ResponseReader } from "./ResponseReader.js"

/** Where a request connects. */
export interface Origin {
  /** The pool's key: connections are shared only within one origin. */
  readonly key: string
  readonly secure: boolean
  /** The address (or name) to connect to. */
  readonly hostname: string
  readonly port: number
  /** The name the certificate must be issued to (TLS only). */
  readonly verifyName: string
}

/** The origin of `url`; `verifyName` when the URL names an address already resolved and checked. */
export const originOf = (url: URL, verifyName?: string): Origin => {
  const secure = url.protocol === "https:"
  const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  const port = url.port === "" ? (secure ? 443 : 80) : Number(url.port)
  const name = verifyName ?? hostname
  return { key: `${secure ? "https" : "http"}|${hostname}|${port}|${name}`, secure, hostname, port, verifyName: name }
}

export interface PoolRequest {
  readonly origin: Origin
  /** The whole request: head and body (src/Net/RequestHead.ts). */
  readonly bytes: Buffer
  /**
   * May go again on a new connection when a kept one closes before any byte of the answer (the
   * server may have closed it just as the request left): only for requests it is safe to repeat.
   */
  readonly resendable: boolean
  /** The request is HEAD: its answer has no body, whatever its head announces. */
  readonly headRequest: boolean
  readonly kept: BodyKept
  /** Aborts the exchange, or the wait for a connection; a connection in use is then closed. */
  readonly signal: AbortSignal
}

export type PoolOutcome =
  | { readonly _tag: "Answer"; readonly answer: ReaderAnswer }
  | { readonly _tag: "Unreachable"; readonly message: string }
  | { readonly _tag: "Malformed"; readonly message: string }
  | { readonly _tag: "Aborted" }

export interface KeepAlivePool {
  readonly request: (request: PoolRequest) => Promise<PoolOutcome>
  /** Closes the idle connections; connections in use close when their exchange ends. */
  readonly close: () => void
}

/** The clock and the repeating timer of the idle sweep; tests drive them by hand. */
export interface PoolTimers {
  /** Milliseconds on a clock that only moves forward. */
  readonly now: () => number
  /** Calls `tick` every `ms` until the returned function is called; must not keep the process alive. */
  readonly every: (ms: number, tick: () => void) => () => void
}

export const systemTimers: PoolTimers = {
  now: () => performance.now(),
  every: (ms, tick) => {
    const timer = setInterval(tick, ms)
    timer.unref()
    return () => clearInterval(timer)
  }
}

export interface PoolOptions {
  /** Most idle connections kept per origin. */
  readonly maxIdlePerOrigin: number
  /** Most connections per origin, idle, in use or connecting; past it, requests wait in turn. */
  readonly maxPerOrigin: number
  /**
   * Idle connections are closed once idle this long, or up to a quarter longer (default 4 s, below
   * common servers' keep-alive timeouts of 5 s or more). A server that closes one first is covered for
   * resendable requests: a kept connection that closes before any answer has its request sent
   * again on a new one.
   */
  readonly idleMs?: number
  /** Trusted CAs instead of the system's (tests). */
  readonly ca?: string
  /** The idle sweep's clock and timer (default: the system's). */
  readonly timers?: PoolTimers
}

/** One exchange waiting on a connection. */
interface Exchange {
  readonly settle: (outcome: ReadEnd | Closed) => void
}

/** The connection closed (or failed) with no answer framed. */
interface Closed {
  readonly _tag: "Closed"
  readonly message: string
  /** No byte of the answer had arrived: perhaps a kept connection the server had just closed. */
  readonly beforeAnswer: boolean
}

interface Connection {
  socket: Socket<Connection> | undefined
  readonly origin: Origin
  readonly place: OriginPlace
  readonly reader: ResponseReader
  exchange: Exchange | undefined
  /** Request bytes the socket did not take yet. */
  unwritten: Buffer | undefined
  closed: boolean
  /** Its place under the cap was given up (once, when its socket closed or never opened). */
  retired: boolean
  /** It carried a request before: the server may have closed it since. */
  used: boolean
  /** When it was last put back idle (on the pool's clock). */
  idleSince: number
}

/** A connection handed over to a waiting request, or leave to open one (already counted). */
type Grant = Connection | "open"

interface Waiter {
  /** Settled: granted, or gave up. */
  done: boolean
  readonly grant: (grant: Grant) => void
}

/** One origin's connections: those counted against the cap, the idle ones, the requests waiting. */
interface OriginPlace {
  readonly key: string
  /** Connections open or opening. */
  open: number
  /** Idle connections, the most recently used last. */
  readonly idle: Array<Connection>
  /** Requests waiting for a connection, oldest first from `head`; settled ones are skipped. */
  readonly waiters: Array<Waiter | undefined>
  head: number
  /** Waiters not yet settled. */
  waiting: number
}

const ABORTED: PoolOutcome = { _tag: "Aborted" }

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

export const makeKeepAlivePool = (options: PoolOptions): KeepAlivePool => {
  const idleMs = options.idleMs ?? 4_000
  const timers = options.timers ?? systemTimers
  const maxPerOrigin = Math.max(1, options.maxPerOrigin)
  const places = new Map<string, OriginPlace>()
  let closing = false

  const placeOf = (origin: Origin): OriginPlace => {
    const known = places.get(origin.key)
    if (known !== undefined) return known
    const place: OriginPlace = { key: origin.key, open: 0, idle: [], waiters: [], head: 0, waiting: 0 }
    places.set(origin.key, place)
    return place
  }

  /** The oldest request still waiting, taken off the queue. */
  const nextWaiter = (place: OriginPlace): Waiter | undefined => {
    while (place.head < place.waiters.length) {
      const waiter = place.waiters[place.head]
      place.waiters[place.head] = undefined
      place.head += 1
      if (waiter !== undefined && !waiter.done) {
        place.waiting -= 1
        return waiter
      }
    }
    place.waiters.length = 0
    place.head = 0
    return undefined
  }

  /** A connection's socket is gone: its place goes to the oldest waiting request. */
  const retire = (connection: Connection) => {
    connection.closed = true
    if (connection.retired) return
    connection.retired = true
    const place = connection.place
    place.open -= 1
    const waiter = place.waiting > 0 ? nextWaiter(place) : undefined
    if (waiter !== undefined) {
      place.open += 1
      waiter.grant("open")
    } else if (place.open === 0 && place.waiting === 0 && places.get(place.key) === place) places.delete(place.key)
  }

  /** Closes a connection that may not carry another request. */
  const discard = (connection: Connection) => {
    if (connection.socket === undefined) return
    connection.socket.terminate()
    retire(connection)
  }

  /**
   * Idle connections are closed by this sweep, not by Bun's socket timeouts: those are checked on
   * a 4-second tick, so a 4-second timeout fired anywhere from 0 to 4 s after it was set, and a
   * connection could be closed moments after it was put back. It runs only while some are idle.
   */
  let stopSweep: (() => void) | undefined
  const sweep = () => {
    const before = timers.now() - idleMs
    let idleLeft = 0
    for (const place of places.values()) {
      const idle = place.idle
      // Oldest first: idle connections are taken from the end.
      const fresh = idle.findIndex((connection) => !connection.closed && connection.idleSince > before)
      const expired = fresh === -1 ? idle.splice(0) : idle.splice(0, fresh)
      for (const connection of expired) discard(connection)
      idleLeft += idle.length
    }
    if (idleLeft === 0 && stopSweep !== undefined) {
      stopSweep()
      stopSweep = undefined
    }
  }

  const finish = (connection: Connection, outcome: ReadEnd | Closed) => {
    const exchange = connection.exchange
    connection.exchange = undefined
    exchange?.settle(outcome)
  }

  const writeOut = (connection: Connection) => {
    const { socket, unwritten } = connection
    if (socket === undefined || unwritten === undefined) return
    const written = socket.write(unwritten)
    connection.unwritten = written >= unwritten.length ? undefined : unwritten.subarray(Math.max(0, written))
  }

  const handlers = {
    data: (socket: Socket<Connection>, chunk: Buffer) => {
      const connection = socket.data
      // Bytes nobody asked for: the connection cannot be trusted with another request.
      if (connection.exchange === undefined) return discard(connection)
      const outcome = connection.reader.push(chunk)
      if (outcome._tag !== "More") finish(connection, outcome)
    },
    drain: (socket: Socket<Connection>) => writeOut(socket.data),
    close: (socket: Socket<Connection>, error?: Error) => {
      const connection = socket.data
      retire(connection)
      if (connection.exchange === undefined) return
      const outcome = connection.reader.closed()
      if (outcome._tag === "Answer") return finish(connection, outcome)
      finish(connection, { _tag: "Closed", message: error?.message ?? outcome.message, beforeAnswer: !connection.reader.started() })
    },
    error: (socket: Socket<Connection>, error: Error) => {
      finish(socket.data, { _tag: "Closed", message: error.message, beforeAnswer: !socket.data.reader.started() })
      discard(socket.data)
    }
  }

  /** A new connection, already counted against the cap, ready for a request (for TLS: the chain and the name verified). */
  const connect = (place: OriginPlace, origin: Origin, signal: AbortSignal): Promise<Connection | PoolOutcome> =>
    new Promise((resolve) => {
      const connection: Connection = {
        socket: undefined,
        origin,
        place,
        reader: new ResponseReader(),
        exchange: undefined,
        unwritten: undefined,
        closed: false,
        retired: false,
        used: false,
        idleSince: 0
      }
      let settled = false
      const done = (result: Connection | PoolOutcome) => {
        if (settled) return
        settled = true
        signal.removeEventListener("abort", onAbort)
        resolve(result)
      }
      const unreachable = (error: unknown) => {
        // A connect that failed holds no socket: its place is free.
        if (connection.socket === undefined) retire(connection)
        done({ _tag: "Unreachable", message: messageOf(error) })
      }
      // Before its socket opens a connect cannot be cancelled: it keeps its place until it opens (then closed at once) or fails.
      const onAbort = () => {
        if (connection.socket !== undefined) discard(connection)
        done(ABORTED)
      }
      if (signal.aborted) {
        retire(connection)
        return resolve(ABORTED)
      }
      signal.addEventListener("abort", onAbort)
      const ready = (socket: Socket<Connection>) => {
        connection.socket = socket
        if (settled) return discard(connection)
        done(connection)
      }
      const sni = isIP(origin.verifyName) === 0 ? origin.verifyName : undefined
      try {
        Bun.connect<Connection>({
          hostname: origin.hostname,
          port: origin.port,
          data: connection,
          ...(origin.secure ? { tls: { ...(sni === undefined ? {} : { serverName: sni }), ...(options.ca === undefined ? {} : { ca: options.ca }) } } : {}),
          socket: {
            ...handlers,
            open: (socket) => {
              connection.socket = socket
              if (settled) return discard(connection)
              if (!origin.secure) ready(socket)
            },
            handshake: (socket, _success, authorizationError) => {
              // Bun checks the chain and the name already; the name is checked here too, so that no
              // request is ever written to a peer whose certificate was not issued to the origin's host.
              const refused = authorizationError ?? checkServerIdentity(origin.verifyName, socket.getPeerCertificate())
              if (refused !== undefined && refused !== null) {
                done({ _tag: "Unreachable", message: messageOf(refused) })
                return discard(connection)
              }
              ready(socket)
            },
            close: (socket, error) => {
              handlers.close(socket, error)
              unreachable(error ?? "the connection closed")
            },
            connectError: (_socket, error) => unreachable(error)
          }
        }).catch(unreachable)
      } catch (error) {
        unreachable(error)
      }
    })

  /** The most recently used idle connection that is still open. */
  const takeIdle = (place: OriginPlace): Connection | undefined => {
    for (let connection = place.idle.pop(); connection !== undefined; connection = place.idle.pop()) {
      if (!connection.closed && connection.socket !== undefined) {
        connection.socket.ref()
        return connection
      }
    }
    return undefined
  }

  /** Waits in turn for a connection handed back, or for a place to open one; undefined once the signal aborts. */
  const wait = (place: OriginPlace, signal: AbortSignal): Promise<Grant | undefined> =>
    new Promise((resolve) => {
      const onAbort = () => {
        if (waiter.done) return
        waiter.done = true
        place.waiting -= 1
        resolve(undefined)
      }
      const waiter: Waiter = {
        done: false,
        grant: (grant) => {
          waiter.done = true
          signal.removeEventListener("abort", onAbort)
          resolve(grant)
        }
      }
      signal.addEventListener("abort", onAbort)
      place.waiters.push(waiter)
      place.waiting += 1
      // Settled waiters at the front are dropped from time to time rather than one by one.
      if (place.head > 1024 && place.head * 2 > place.waiters.length) {
        place.waiters.splice(0, place.head)
        place.head = 0
      }
    })

  /**
   * A connection for the request: an idle one, a new one while the origin is under its cap, or the
   * next one handed back or closed. `fresh` (a request sent again) leaves the idle ones, which may be
   * as stale as the one that just failed, and makes room by closing the oldest when at the cap.
   */
  const acquire = async (origin: Origin, signal: AbortSignal, fresh: boolean): Promise<Connection | PoolOutcome> => {
    if (!fresh) {
      const idle = takeIdle(placeOf(origin))
      if (idle !== undefined) return idle
    } else {
      // Idle connections mean nobody is waiting: closing the oldest frees a place for this request.
      const idle = placeOf(origin).idle
      while (idle.length > 0 && placeOf(origin).open >= maxPerOrigin) {
        const oldest = idle.shift()
        if (oldest !== undefined) discard(oldest)
      }
    }
    // Looked up again: a place whose last connection just closed is forgotten.
    const place = placeOf(origin)
    if (place.open < maxPerOrigin) {
      place.open += 1
      return connect(place, origin, signal)
    }
    const grant = await wait(place, signal)
    if (grant === undefined) return ABORTED
    return grant === "open" ? connect(place, origin, signal) : grant
  }

  /** After a clean answer: the connection goes to the oldest waiting request, or idle. */
  const release = (connection: Connection) => {
    const place = connection.place
    if (closing || connection.closed || connection.socket === undefined) return discard(connection)
    const waiter = place.waiting > 0 ? nextWaiter(place) : undefined
    if (waiter !== undefined) return waiter.grant(connection)
    if (place.idle.length >= options.maxIdlePerOrigin) return discard(connection)
    connection.idleSince = timers.now()
    connection.socket.unref()
    place.idle.push(connection)
    // Idle connections do not keep the process alive, nor does their sweep.
    stopSweep ??= timers.every(Math.max(10, idleMs / 4), sweep)
  }

  /** One request on one connection. */
  const exchange = (connection: Connection, request: PoolRequest): Promise<ReadEnd | Closed> =>
    new Promise((resolve) => {
      const socket = connection.socket
      if (socket === undefined || connection.closed) return resolve({ _tag: "Closed", message: "the connection closed", beforeAnswer: true })
      const onAbort = () => {
        finish(connection, { _tag: "Closed", message: "aborted", beforeAnswer: false })
        discard(connection)
      }
      connection.exchange = {
        settle: (outcome) => {
          request.signal.removeEventListener("abort", onAbort)
          resolve(outcome)
        }
      }
      request.signal.addEventListener("abort", onAbort)
      connection.reader.reset(request.kept, request.headRequest)
      connection.unwritten = request.bytes
      writeOut(connection)
    })

  const request = async (request: PoolRequest): Promise<PoolOutcome> => {
    let fresh = false
    for (;;) {
      if (request.signal.aborted) return ABORTED
      const connection = await acquire(request.origin, request.signal, fresh)
      if (!("reader" in connection)) return connection
      const kept = connection.used
      connection.used = true
      // Aborted while the connection was on its way: unused, it goes back.
      if (request.signal.aborted) {
        release(connection)
        return ABORTED
      }
      const outcome = await exchange(connection, request)
      if (outcome._tag === "Answer") {
        // The connection goes back to the pool only after a clean answer to a request sent whole.
        if (outcome.answer.reusable && connection.unwritten === undefined) release(connection)
        else discard(connection)
        return outcome
      }
      discard(connection)
      if (request.signal.aborted) return ABORTED
      if (outcome._tag === "Malformed") return outcome
      if (!kept || fresh || !outcome.beforeAnswer || !request.resendable) return { _tag: "Unreachable", message: outcome.message }
      fresh = true
    }
  }

  const close = () => {
    closing = true
    stopSweep?.()
    stopSweep = undefined
    for (const place of places.values()) for (const connection of place.idle.splice(0)) discard(connection)
  }

  return { request, close }
}

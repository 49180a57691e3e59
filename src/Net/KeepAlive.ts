/**
 * HTTP/1.1 exchanges over kept-alive connections, pooled per origin (scheme, address, port and the
 * name a certificate must carry), on `Bun.connect`. Bun's fetch parks at most 64 idle sockets in its
 * pool and closes every other connection after its answer, so past 64 requests in flight most of
 * them opened a new connection (and TLS session) and left a socket in TIME_WAIT; here a connection
 * is kept for as long as its server keeps it. TLS connections verify the chain and the host name
 * before a byte of the request is written. Idle connections do not keep the process alive.
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
  /** The whole request: head and body. */
  readonly bytes: Buffer
  /**
   * May go again on a new connection when a kept one closes before any byte of the answer (the
   * server may have closed it just as the request left): only for requests it is safe to repeat.
   */
  readonly resendable: boolean
  readonly kept: BodyKept
  /** Aborts the exchange; its connection is then closed. */
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

export interface PoolOptions {
  /** Most idle connections kept per origin. */
  readonly maxIdlePerOrigin: number
  /**
   * Idle connections are closed once idle this long, or up to a quarter longer (default 4 s, below
   * common servers' keep-alive timeouts of 5 s or more). A server that closes one first is covered for
   * resendable requests: a kept connection that closes before any answer has its request sent
   * again on a new one.
   */
  readonly idleMs?: number
  /** Trusted CAs instead of the system's (tests). */
  readonly ca?: string
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
  readonly reader: ResponseReader
  exchange: Exchange | undefined
  /** Request bytes the socket did not take yet. */
  unwritten: Buffer | undefined
  closed: boolean
  /** When it was last put back idle (ms since the epoch). */
  idleSince: number
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

export const makeKeepAlivePool = (options: PoolOptions): KeepAlivePool => {
  const idleMs = options.idleMs ?? 4_000
  const idle = new Map<string, Array<Connection>>()
  let closing = false

  /**
   * Idle connections are closed by this sweep, not by Bun's socket timeouts: those are checked on
   * a 4-second tick, so a 4-second timeout fired anywhere from 0 to 4 s after it was set, and a
   * connection could be closed moments after it was put back. It runs only while some are idle.
   */
  let sweeper: ReturnType<typeof setInterval> | undefined
  const sweep = () => {
    const before = Date.now() - idleMs
    for (const [key, stack] of idle) {
      // Oldest first: a stack is taken from its end.
      const stale = stack.findIndex((connection) => connection.idleSince > before)
      const expired = stale === -1 ? stack.splice(0) : stack.splice(0, stale)
      for (const connection of expired) connection.socket?.terminate()
      if (stack.length === 0) idle.delete(key)
    }
    if (idle.size === 0 && sweeper !== undefined) {
      clearInterval(sweeper)
      sweeper = undefined
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
      if (connection.exchange === undefined) return socket.terminate()
      const outcome = connection.reader.push(chunk)
      if (outcome._tag !== "More") finish(connection, outcome)
    },
    drain: (socket: Socket<Connection>) => writeOut(socket.data),
    close: (socket: Socket<Connection>, error?: Error) => {
      const connection = socket.data
      connection.closed = true
      if (connection.exchange === undefined) return
      const outcome = connection.reader.closed()
      if (outcome._tag === "Answer") return finish(connection, outcome)
      finish(connection, { _tag: "Closed", message: error?.message ?? outcome.message, beforeAnswer: !connection.reader.started() })
    },
    error: (socket: Socket<Connection>, error: Error) => {
      finish(socket.data, { _tag: "Closed", message: error.message, beforeAnswer: !socket.data.reader.started() })
      socket.terminate()
    }
  }

  /** A new connection, ready for a request (for TLS: the chain and the name verified). */
  const connect = (origin: Origin, signal: AbortSignal): Promise<Connection | PoolOutcome> =>
    new Promise((resolve) => {
      const connection: Connection = {
        socket: undefined,
        origin,
        reader: new ResponseReader(),
        exchange: undefined,
        unwritten: undefined,
        closed: false,
        idleSince: 0
      }
      let settled = false
      const done = (result: Connection | PoolOutcome) => {
        if (settled) return
        settled = true
        signal.removeEventListener("abort", onAbort)
        resolve(result)
      }
      const unreachable = (error: unknown) => done({ _tag: "Unreachable", message: messageOf(error) })
      const onAbort = () => {
        connection.socket?.terminate()
        done({ _tag: "Aborted" })
      }
      signal.addEventListener("abort", onAbort)
      const ready = (socket: Socket<Connection>) => {
        connection.socket = socket
        if (settled) return socket.terminate()
        done(connection)
      }
      const sni = isIP(origin.verifyName) === 0 ? origin.verifyName : undefined
      Bun.connect<Connection>({
        hostname: origin.hostname,
        port: origin.port,
        data: connection,
        ...(origin.secure ? { tls: { ...(sni === undefined ? {} : { serverName: sni }), ...(options.ca === undefined ? {} : { ca: options.ca }) } } : {}),
        socket: {
          ...handlers,
          open: (socket) => {
            connection.socket = socket
            if (!origin.secure) ready(socket)
          },
          handshake: (socket, _success, authorizationError) => {
            // Bun checks the chain and the name already; the name is checked here too, so that no
            // request is ever written to a peer whose certificate was not issued to the origin's host.
            const refused = authorizationError ?? checkServerIdentity(origin.verifyName, socket.getPeerCertificate())
            if (refused !== undefined && refused !== null) {
              unreachable(refused)
              return socket.terminate()
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
    })

  const takeIdle = (origin: Origin): Connection | undefined => {
    const stack = idle.get(origin.key)
    if (stack === undefined) return undefined
    for (let connection = stack.pop(); connection !== undefined; connection = stack.pop()) {
      if (!connection.closed && connection.socket !== undefined) {
        connection.socket.ref()
        return connection
      }
    }
    idle.delete(origin.key)
    return undefined
  }

  const release = (connection: Connection) => {
    const stack = idle.get(connection.origin.key) ?? []
    if (closing || connection.closed || connection.socket === undefined || stack.length >= options.maxIdlePerOrigin) {
      connection.socket?.terminate()
      return
    }
    connection.idleSince = Date.now()
    connection.socket.unref()
    stack.push(connection)
    idle.set(connection.origin.key, stack)
    if (sweeper === undefined) {
      sweeper = setInterval(sweep, Math.max(10, idleMs / 4))
      // Idle connections do not keep the process alive, nor does their sweep.
      sweeper.unref()
    }
  }

  /** One request on one connection. */
  const exchange = (connection: Connection, request: PoolRequest): Promise<ReadEnd | Closed> =>
    new Promise((resolve) => {
      const socket = connection.socket
      if (socket === undefined || connection.closed) return resolve({ _tag: "Closed", message: "the connection closed", beforeAnswer: true })
      const onAbort = () => {
        finish(connection, { _tag: "Closed", message: "aborted", beforeAnswer: false })
        socket.terminate()
      }
      connection.exchange = {
        settle: (outcome) => {
          request.signal.removeEventListener("abort", onAbort)
          resolve(outcome)
        }
      }
      request.signal.addEventListener("abort", onAbort)
      connection.reader.reset(request.kept)
      connection.unwritten = request.bytes
      writeOut(connection)
    })

  const request = async (request: PoolRequest): Promise<PoolOutcome> => {
    if (request.signal.aborted) return { _tag: "Aborted" }
    let kept = takeIdle(request.origin)
    for (;;) {
      const connection = kept ?? await connect(request.origin, request.signal)
      if (!("reader" in connection)) return request.signal.aborted ? { _tag: "Aborted" } : connection
      const outcome = await exchange(connection, request)
      if (outcome._tag === "Answer") {
        // The connection goes back to the pool only after a clean answer to a request sent whole.
        if (outcome.answer.reusable && connection.unwritten === undefined) release(connection)
        else connection.socket?.terminate()
        return outcome
      }
      connection.socket?.terminate()
      if (request.signal.aborted) return { _tag: "Aborted" }
      if (outcome._tag === "Malformed") return outcome
      if (kept === undefined || !outcome.beforeAnswer || !request.resendable) return { _tag: "Unreachable", message: outcome.message }
      kept = undefined
    }
  }

  const close = () => {
    closing = true
    if (sweeper !== undefined) clearInterval(sweeper)
    sweeper = undefined
    for (const stack of idle.values()) for (const connection of stack) connection.socket?.terminate()
    idle.clear()
  }

  return { request, close }
}

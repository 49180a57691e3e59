/**
 * Webhook POSTs over kept-alive HTTP/1.1 connections, pooled per receiver address. Bun's fetch
 * parks at most 64 idle sockets in all and closes every other one after its response, so with more
 * attempts in flight most deliveries opened a new connection (and TLS session) and left a socket
 * in TIME_WAIT; here every connection is kept while its receiver keeps it. Requests go to the
 * address UrlPolicy checked, redirects are not followed, and the whole exchange is bounded by the
 * timeout. TLS connections verify the chain and the host name before any byte of the request is
 * sent. Reports what the receiver answered, or why there was no answer.
 */
import type { Socket } from "bun"
import { Data } from "effect"
import { isIP } from "node:net"
import { checkServerIdentity } from "node:tls"
import type { ConnectTarget } from "../Webhooks/UrlPolicy.js"
import { type ReadEnd, ResponseReader } from "./ResponseReader.js"

export const USER_AGENT = "MessagingHub-Webhooks/0.1"
export const SNIPPET_BYTES = 1024

export interface ReceiverAnswer {
  readonly status: number
  readonly retryAfter: string | null
  /** The first KB of the answer's body, as text. */
  readonly snippet: string
}

export class NoAnswer extends Data.TaggedError("NoAnswer")<{ readonly message: string }> {}

export interface SendInput {
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

export interface SenderOptions {
  /** Most idle connections kept per receiver address. */
  readonly maxIdlePerOrigin: number
  /**
   * Idle connections are closed after about this long (Bun checks socket timeouts every few
   * seconds). A receiver that closes one first is covered: a kept connection that closes before
   * any answer has its request sent again on a new one.
   */
  readonly idleSeconds?: number
  /** Trusted CAs instead of the system's (tests). */
  readonly ca?: string
}

/** Where a pinned URL connects, parsed once per URL. */
interface Origin {
  readonly key: string
  readonly secure: boolean
  readonly hostname: string
  readonly port: number
  readonly path: string
  /** The name the certificate must be issued to (TLS only). */
  readonly verifyName: string
}

/** One attempt waiting on a connection. */
interface Exchange {
  readonly settle: (outcome: ReadEnd | Closed) => void
}

/** The connection closed (or failed) with no answer framed. */
interface Closed {
  readonly _tag: "Closed"
  readonly message: string
  /** No byte of the answer had arrived: a reused connection the receiver had just closed. */
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
}

const describe = (error: unknown): string => `could not be reached: ${error instanceof Error ? error.message : String(error)}`

const unbracketed = (hostname: string) => (hostname.startsWith("[") ? hostname.slice(1, -1) : hostname)

export const makeSender = (options: SenderOptions): Sender => {
  const idleSeconds = options.idleSeconds ?? 4
  const idle = new Map<string, Array<Connection>>()
  const origins = new Map<string, Origin>()
  let closing = false

  const originOf = (target: ConnectTarget): Origin => {
    // The same pinned URL may stand for several host names (one address serving many): the name is part of the key.
    const cacheKey = `${target.serverName ?? ""} ${target.url}`
    const known = origins.get(cacheKey)
    if (known !== undefined) return known
    const url = new URL(target.url)
    const secure = url.protocol === "https:"
    const hostname = unbracketed(url.hostname)
    const port = url.port === "" ? (secure ? 443 : 80) : Number(url.port)
    const verifyName = target.serverName ?? hostname
    const origin: Origin = { key: `${secure ? "https" : "http"}|${hostname}|${port}|${verifyName}`, secure, hostname, port, path: `${url.pathname}${url.search}`, verifyName }
    if (origins.size >= 10_000) origins.clear()
    origins.set(cacheKey, origin)
    return origin
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
    },
    timeout: (socket: Socket<Connection>) => {
      // Only idle connections have a socket timeout; an attempt's own timer bounds the rest.
      if (socket.data.exchange === undefined) socket.terminate()
    }
  }

  /** A new connection, ready for a request (for TLS: the chain and the name verified). */
  const connect = (origin: Origin, signal: AbortSignal): Promise<Connection | NoAnswer> =>
    new Promise((resolve) => {
      const connection: Connection = { socket: undefined, origin, reader: new ResponseReader(), exchange: undefined, unwritten: undefined, closed: false }
      let settled = false
      const done = (result: Connection | NoAnswer) => {
        if (settled) return
        settled = true
        signal.removeEventListener("abort", onAbort)
        resolve(result)
      }
      const onAbort = () => {
        connection.socket?.terminate()
        done(new NoAnswer({ message: "aborted" }))
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
            // request is ever written to a peer whose certificate was not issued to the webhook's host.
            const refused = authorizationError ?? checkServerIdentity(origin.verifyName, socket.getPeerCertificate())
            if (refused !== undefined && refused !== null) {
              done(new NoAnswer({ message: describe(refused) }))
              return socket.terminate()
            }
            ready(socket)
          },
          close: (socket, error) => {
            handlers.close(socket, error)
            done(new NoAnswer({ message: describe(error ?? "the connection closed") }))
          },
          connectError: (_socket, error) => done(new NoAnswer({ message: describe(error) }))
        }
      }).catch((error: unknown) => done(new NoAnswer({ message: describe(error) })))
    })

  const takeIdle = (origin: Origin): Connection | undefined => {
    const stack = idle.get(origin.key)
    if (stack === undefined) return undefined
    for (let connection = stack.pop(); connection !== undefined; connection = stack.pop()) {
      if (!connection.closed && connection.socket !== undefined) return connection
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
    connection.socket.timeout(idleSeconds)
    stack.push(connection)
    idle.set(connection.origin.key, stack)
  }

  /** One request on one connection; the connection goes back to the pool only after a clean answer. */
  const exchange = (connection: Connection, request: Buffer, signal: AbortSignal): Promise<ReadEnd | Closed> =>
    new Promise((resolve) => {
      const socket = connection.socket
      if (socket === undefined || connection.closed) return resolve({ _tag: "Closed", message: "the connection closed", beforeAnswer: true })
      const onAbort = () => {
        finish(connection, { _tag: "Closed", message: "aborted", beforeAnswer: false })
        socket.terminate()
      }
      connection.exchange = {
        settle: (outcome) => {
          signal.removeEventListener("abort", onAbort)
          resolve(outcome)
        }
      }
      signal.addEventListener("abort", onAbort)
      socket.timeout(0)
      connection.reader.reset()
      connection.unwritten = request
      writeOut(connection)
    })

  const send = async (input: SendInput): Promise<ReceiverAnswer | NoAnswer> => {
    const aborted = () => new NoAnswer({ message: `no answer within ${input.timeoutMs} ms` })
    if (input.signal.aborted) return aborted()
    const origin = originOf(input.target)
    const head = Object.entries({ ...input.headers, host: input.target.hostHeader }).map(([name, value]) => `${name}: ${value}\r\n`).join("")
    const body = Buffer.from(input.body)
    const request = Buffer.concat([Buffer.from(`POST ${origin.path} HTTP/1.1\r\n${head}content-length: ${body.length}\r\n\r\n`, "latin1"), body])
    // A kept connection the receiver has just closed fails before any answer: the request goes again on a new one.
    let kept = takeIdle(origin)
    for (;;) {
      const connection = kept ?? await connect(origin, input.signal)
      if (connection instanceof NoAnswer) return input.signal.aborted ? aborted() : connection
      const outcome = await exchange(connection, request, input.signal)
      if (outcome._tag === "Answer") {
        if (outcome.answer.reusable && connection.unwritten === undefined) release(connection)
        else connection.socket?.terminate()
        return { status: outcome.answer.status, retryAfter: outcome.answer.retryAfter, snippet: outcome.answer.snippet }
      }
      connection.socket?.terminate()
      if (input.signal.aborted) return aborted()
      if (kept === undefined || outcome._tag !== "Closed" || !outcome.beforeAnswer) {
        return new NoAnswer({ message: outcome._tag === "Malformed" ? `the receiver's answer is malformed: ${outcome.message}` : describe(outcome.message) })
      }
      kept = undefined
    }
  }

  const close = () => {
    closing = true
    for (const stack of idle.values()) for (const connection of stack) connection.socket?.terminate()
    idle.clear()
  }

  return { send, close }
}

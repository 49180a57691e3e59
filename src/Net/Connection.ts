/**
 * One kept-alive HTTP/1.1 connection on `Bun.connect`: it opens (for TLS, verifying the chain and the
 * host name before a byte of any request is written), carries one request at a time (the bytes of
 * src/Net/RequestHead.ts, the answer read by src/Net/ResponseReader.ts) and tells its owner, once,
 * when its socket is gone. Which connection carries which request, and how many there are, is the
 * pool's business (src/Net/Pool.ts).
 */
import type { Socket } from "bun"
import { isIP } from "node:net"
import { checkServerIdentity } from "node:tls"
import { type BodyKept, type ReadEnd, ResponseReader } from "./ResponseReader.js"

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

/** What one connection carries: a whole request, and how to read its answer. */
export interface ConnectionRequest {
  /** The whole request: head and body (src/Net/RequestHead.ts). */
  readonly bytes: Buffer
  /** The request is HEAD: its answer has no body, whatever its head announces. */
  readonly headRequest: boolean
  readonly kept: BodyKept
  /** Aborts the exchange (in a pool, the wait for a connection too); the connection is then closed. */
  readonly signal: AbortSignal
}

/** The connection closed (or failed) with no answer framed. */
interface Closed {
  readonly _tag: "Closed"
  readonly message: string
  /** No byte of the answer had arrived: perhaps a kept connection the server had just closed. */
  readonly beforeAnswer: boolean
}

/** How an exchange on a connection ended. */
export type ExchangeEnd = ReadEnd | Closed

/** Why no connection: it could not be opened, or the request's signal aborted first. */
export type ConnectFailure =
  | { readonly _tag: "Unreachable"; readonly message: string }
  | { readonly _tag: "Aborted" }

export const ABORTED: ConnectFailure = { _tag: "Aborted" }

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const CLOSED_BEFORE: Closed = { _tag: "Closed", message: "the connection closed", beforeAnswer: true }

/** One connection; an owner that counts its connections (the pool) overrides `gone`. */
export class Connection {
  socket: Socket<Connection> | undefined = undefined
  readonly reader = new ResponseReader()
  /** Settles the exchange in progress, if any. */
  settle: ((end: ExchangeEnd) => void) | undefined = undefined
  /** Request bytes the socket did not take yet. */
  unwritten: Buffer | undefined = undefined
  closed = false
  /** It carried a request before: the server may have closed it since. */
  used = false
  /** When it was last put back idle (on its pool's clock). */
  idleSince = 0
  /** It was retired (once: when its socket closed or never opened). */
  private retired = false

  constructor(readonly origin: Origin) {}

  /** Called once, when its socket is gone or will never open. */
  protected gone(): void {}

  /** Its socket is gone, or will never open. */
  retire(): void {
    this.closed = true
    if (this.retired) return
    this.retired = true
    this.gone()
  }

  /** Closes it: it may not carry another request. */
  discard(): void {
    if (this.socket === undefined) return
    this.socket.terminate()
    this.retire()
  }

  finish(end: ExchangeEnd): void {
    const settle = this.settle
    this.settle = undefined
    settle?.(end)
  }

  writeOut(): void {
    const { socket, unwritten } = this
    if (socket === undefined || unwritten === undefined) return
    const written = socket.write(unwritten)
    this.unwritten = written >= unwritten.length ? undefined : unwritten.subarray(Math.max(0, written))
  }

  /** One request on this connection; aborting its signal closes the connection. */
  exchange(request: ConnectionRequest): Promise<ExchangeEnd> {
    return new Promise((resolve) => {
      if (this.socket === undefined || this.closed) return resolve(CLOSED_BEFORE)
      const onAbort = () => {
        this.finish({ _tag: "Closed", message: "aborted", beforeAnswer: false })
        this.discard()
      }
      this.settle = (end) => {
        request.signal.removeEventListener("abort", onAbort)
        resolve(end)
      }
      request.signal.addEventListener("abort", onAbort)
      this.reader.reset(request.kept, request.headRequest)
      this.unwritten = request.bytes
      this.writeOut()
    })
  }
}

/** The socket events of an open connection. */
const handlers = {
  data: (socket: Socket<Connection>, chunk: Buffer) => {
    const connection = socket.data
    // Bytes nobody asked for: the connection cannot be trusted with another request.
    if (connection.settle === undefined) return connection.discard()
    const outcome = connection.reader.push(chunk)
    if (outcome._tag !== "More") connection.finish(outcome)
  },
  drain: (socket: Socket<Connection>) => socket.data.writeOut(),
  close: (socket: Socket<Connection>, error?: Error) => {
    const connection = socket.data
    connection.retire()
    if (connection.settle === undefined) return
    const outcome = connection.reader.closed()
    if (outcome._tag === "Answer") return connection.finish(outcome)
    connection.finish({
      _tag: "Closed",
      message: error?.message ?? outcome.message,
      beforeAnswer: !connection.reader.started()
    })
  },
  error: (socket: Socket<Connection>, error: Error) => {
    socket.data.finish({ _tag: "Closed", message: error.message, beforeAnswer: !socket.data.reader.started() })
    socket.data.discard()
  }
}

/** The TLS options of a connection to `origin`: the name to present, and the trusted CAs if not the system's. */
const tlsOptions = (origin: Origin, ca: string | undefined) => {
  const sni = isIP(origin.verifyName) === 0 ? origin.verifyName : undefined
  return { ...(sni === undefined ? {} : { serverName: sni }), ...(ca === undefined ? {} : { ca }) }
}

/**
 * Opens `connection` (new, to its origin) and answers it once ready for a request (for TLS: the
 * chain and the name verified); it is retired if its socket never opens (a failed or abandoned connect). Before its socket opens a connect cannot be cancelled: when `signal` aborts
 * first the answer is Aborted at once, and the socket is closed as soon as it opens (or the connect fails).
 */
export const openConnection = <C extends Connection>(
  connection: C,
  ca: string | undefined,
  signal: AbortSignal
): Promise<C | ConnectFailure> =>
  new Promise((resolve) => {
    const origin = connection.origin
    let settled = false
    const done = (result: C | ConnectFailure) => {
      if (settled) return
      settled = true
      signal.removeEventListener("abort", onAbort)
      resolve(result)
    }
    const unreachable = (error: unknown) => {
      // A connect that failed holds no socket: it is gone.
      if (connection.socket === undefined) connection.retire()
      done({ _tag: "Unreachable", message: messageOf(error) })
    }
    const onAbort = () => {
      if (connection.socket !== undefined) connection.discard()
      done(ABORTED)
    }
    if (signal.aborted) {
      connection.retire()
      return resolve(ABORTED)
    }
    signal.addEventListener("abort", onAbort)
    const ready = (socket: Socket<Connection>) => {
      connection.socket = socket
      if (settled) return connection.discard()
      done(connection)
    }
    try {
      Bun.connect<Connection>({
        hostname: origin.hostname,
        port: origin.port,
        data: connection,
        ...(origin.secure ? { tls: tlsOptions(origin, ca) } : {}),
        socket: {
          ...handlers,
          open: (socket) => {
            connection.socket = socket
            if (settled) return connection.discard()
            if (!origin.secure) ready(socket)
          },
          handshake: (socket, _success, authorizationError) => {
            // Bun checks the chain and the name already; the name is checked here too, so that no
            // request is ever written to a peer whose certificate was not issued to the origin's host.
            const refused = authorizationError ?? checkServerIdentity(origin.verifyName, socket.getPeerCertificate())
            if (refused !== undefined && refused !== null) {
              done({ _tag: "Unreachable", message: messageOf(refused) })
              return connection.discard()
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

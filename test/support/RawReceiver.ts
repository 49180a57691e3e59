/**
 * A webhook receiver on a raw TCP (or TLS) listener, speaking just enough HTTP/1.1 to count the
 * connections it is given and the requests on each, and to misbehave on purpose.
 */
import type { Socket, TCPSocketListener } from "bun"
import { Effect } from "effect"

export interface RawRequest {
  readonly connection: number
  readonly head: string
  readonly body: string
}

/** What the receiver does with a request: answer these bytes (then maybe close), close at once, or never answer. */
export type Reply = { readonly bytes: string; readonly close?: boolean } | "close" | "hang"

export interface RawReceiver {
  readonly port: number
  readonly requests: Array<RawRequest>
  /** Connections opened so far. */
  readonly connections: () => number
  /** Connections closed so far (by either side). */
  readonly closedConnections: () => number
  /** Resolves once `n` requests have arrived. */
  readonly whenRequests: (n: number) => Promise<void>
  /** Resolves once `n` connections have closed (by either side). */
  readonly whenClosed: (n: number) => Promise<void>
  /** The most connections that were open at once. */
  readonly peakConnections: () => number
  /** Bytes received in all, request or not. */
  readonly bytesReceived: () => number
}

export const OK = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

/** A receiver speaking just enough HTTP/1.1 to count connections and requests. */
export const rawReceiver = (
  reply: (request: RawRequest, index: number) => Reply,
  tls?: { readonly key: string; readonly cert: string }
) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const requests: Array<RawRequest> = []
      let connections = 0
      let closed = 0
      let peak = 0
      let received = 0
      const closeWaiters: Array<{ readonly n: number; readonly resolve: () => void }> = []
      const requestWaiters: Array<{ readonly n: number; readonly resolve: () => void }> = []
      const buffers = new Map<Socket<{ id: number }>, Buffer>()
      const listener: TCPSocketListener<{ id: number }> = Bun.listen<{ id: number }>({
        hostname: "127.0.0.1",
        port: 0,
        ...(tls === undefined ? {} : { tls }),
        socket: {
          open: (socket) => {
            socket.data = { id: connections++ }
            // Counted once the loop has turned: a client that closed one connection and then opened
            // the next may have its close seen here after the open (under load, events of one turn
            // come in any order), which is not two connections at once on the client's side.
            const opened = connections
            setImmediate(() => {
              peak = Math.max(peak, opened - closed)
            })
          },
          data: (socket, chunk) => {
            received += chunk.length
            let buffer = Buffer.concat([buffers.get(socket) ?? Buffer.alloc(0), chunk])
            for (;;) {
              const end = buffer.indexOf("\r\n\r\n")
              if (end < 0) break
              const head = buffer.subarray(0, end).toString("latin1")
              const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0)
              if (buffer.length < end + 4 + length) break
              const request = {
                connection: socket.data.id,
                head,
                body: buffer.subarray(end + 4, end + 4 + length).toString()
              }
              buffer = buffer.subarray(end + 4 + length)
              requests.push(request)
              for (const waiter of requestWaiters.filter((w) => w.n <= requests.length)) {
                requestWaiters.splice(requestWaiters.indexOf(waiter), 1)
                waiter.resolve()
              }
              const answer = reply(request, requests.length - 1)
              if (answer === "close") {
                socket.end()
                return
              }
              if (answer !== "hang") {
                socket.write(answer.bytes)
                if (answer.close === true) socket.end()
              }
            }
            buffers.set(socket, buffer)
          },
          close: (socket) => {
            closed++
            buffers.delete(socket)
            for (const waiter of closeWaiters.filter((w) => w.n <= closed)) {
              closeWaiters.splice(closeWaiters.indexOf(waiter), 1)
              waiter.resolve()
            }
          }
        }
      })
      const receiver: RawReceiver = {
        port: listener.port,
        requests,
        connections: () => connections,
        closedConnections: () => closed,
        whenRequests: (n) => (requests.length >= n ? Promise.resolve() : new Promise((resolve) =>
          requestWaiters.push({ n, resolve })
        )),
        whenClosed: (n) => (closed >= n ? Promise.resolve() : new Promise((resolve) =>
          closeWaiters.push({ n, resolve })
        )),
        peakConnections: () => peak,
        bytesReceived: () => received
      }
      return { receiver, listener }
    }),
    ({ listener }) => Effect.sync(() => listener.stop(true))
  ).pipe(Effect.map(({ receiver }) => receiver))

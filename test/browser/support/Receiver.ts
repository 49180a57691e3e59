/** A webhook receiver on 127.0.0.1 for the browser tests: records every request and answers as told. */
import { createServer, type IncomingHttpHeaders } from "node:http"

interface Received {
  readonly headers: IncomingHttpHeaders
  readonly body: string
}

export interface Receiver {
  readonly url: string
  readonly requests: ReadonlyArray<Received>
  /** Resolves once `count` requests have arrived (woken by each one, never by a timer). */
  readonly received: (count: number) => Promise<ReadonlyArray<Received>>
  readonly close: () => Promise<void>
}

/** `status(index)` is the answer to the index-th request (from 0). */
export const startReceiver = async (status: (index: number) => number): Promise<Receiver> => {
  const requests: Array<Received> = []
  const waiting = new Set<() => void>()
  const server = createServer((request, response) => {
    let body = ""
    request.setEncoding("utf8")
    request.on("data", (chunk: string) => (body += chunk))
    request.on("end", () => {
      const index = requests.length
      requests.push({ headers: request.headers, body })
      response.writeHead(status(index), { "content-type": "text/plain" }).end(status(index) < 300 ? "ok" : "not now")
      for (const wake of waiting) wake()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const received = (count: number) =>
    new Promise<ReadonlyArray<Received>>((resolve) => {
      const check = () => {
        if (requests.length < count) return
        waiting.delete(check)
        resolve(requests.slice())
      }
      waiting.add(check)
      check()
    })
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()))
  return { url: `http://127.0.0.1:${port}/hook`, requests, received, close }
}

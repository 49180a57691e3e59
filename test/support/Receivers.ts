/**
 * Webhook receivers for tests: Bun servers on 127.0.0.1 port 0 that record every request and answer
 * as told (a status, headers, a body, or never: "hang"). Tests wait on what arrived with `waitFor`,
 * which is woken by each request and bounded by a deadline, never by sleeping.
 */
import { Duration, Effect } from "effect"

export interface ReceivedRequest {
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: string
}

export type Reply =
  | {
    readonly status: number
    readonly headers?: Record<string, string>
    readonly body?: string
    readonly delayMs?: number
  }
  | "hang"

interface Receiver {
  readonly url: string
  readonly requests: ReadonlyArray<ReceivedRequest>
  /** Waits until the requests received so far satisfy the condition; dies naming `what` after the deadline. */
  readonly waitFor: (
    what: string,
    condition: (requests: ReadonlyArray<ReceivedRequest>) => boolean,
    deadline?: Duration.DurationInput
  ) => Effect.Effect<ReadonlyArray<ReceivedRequest>>
  /** The distinct `webhook-id` values received. */
  readonly distinctIds: () => ReadonlySet<string>
  /** The most requests that were open at the same time. */
  readonly maxConcurrent: () => number
}

export const DEFAULT_DEADLINE = Duration.seconds(10)

/** A receiver that lives as long as the enclosing scope; `reply` decides each answer (by arrival index). */
export const makeReceiver = (
  reply: (request: ReceivedRequest, index: number) => Reply | Promise<Reply> = () => ({ status: 200 })
) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const requests: Array<ReceivedRequest> = []
      const listeners = new Set<() => void>()
      const hanging = new Set<() => void>()
      let open = 0
      let peak = 0
      const server = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        async fetch(request) {
          const headers: Record<string, string> = {}
          request.headers.forEach((value, key) => {
            headers[key] = value
          })
          const received: ReceivedRequest = { path: new URL(request.url).pathname, headers, body: await request.text() }
          requests.push(received)
          open++
          peak = Math.max(peak, open)
          let closed = false
          const close = () => {
            if (!closed) open--
            closed = true
          }
          request.signal.addEventListener("abort", close)
          const pending = reply(received, requests.length - 1)
          for (const listener of [...listeners]) listener()
          const answer = await pending
          if (answer === "hang") {
            return new Promise<Response>((resolve) =>
              hanging.add(() => resolve(new Response("released", { status: 503 })))
            )
          }
          // A slow receiver: the delay is the receiver's behaviour under test, not a wait in the test.
          if (answer.delayMs !== undefined) await Bun.sleep(answer.delayMs)
          close()
          return new Response(answer.body ?? "", { status: answer.status, headers: answer.headers ?? {} })
        }
      })
      const receiver: Receiver = {
        url: `http://127.0.0.1:${server.port}/hook`,
        requests,
        waitFor: (what, condition, deadline = DEFAULT_DEADLINE) =>
          Effect.async<ReadonlyArray<ReceivedRequest>>((resume) => {
            const check = () => {
              if (condition(requests)) {
                listeners.delete(check)
                resume(Effect.succeed([...requests]))
              }
            }
            listeners.add(check)
            check()
            return Effect.sync(() => listeners.delete(check))
          }).pipe(
            Effect.timeoutFail({
              duration: deadline,
              onTimeout: () =>
                new Error(`receiver: ${what} did not happen in time; ${requests.length} request(s) arrived`)
            }),
            Effect.orDie
          ),
        distinctIds: () => new Set(requests.map((r) => r.headers["webhook-id"] ?? "")),
        maxConcurrent: () => peak
      }
      return { receiver, server, hanging }
    }),
    ({ hanging, server }) =>
      Effect.promise(async () => {
        for (const release of hanging) release()
        await server.stop(true)
      })
  ).pipe(Effect.map(({ receiver }) => receiver))

/**
 * One Graph exchange's abort switch and deadline: a plain timer that aborts the call (answer and
 * body) through an AbortSignal, rather than a timer fiber per call.
 */
import type { HttpClientError } from "@effect/platform"

/** The reason a timed-out exchange was aborted with; `isTimeout` recognises it in an error's cause. */
export class DeadlineExceeded extends Error {
  override readonly name = "DeadlineExceeded"
}

/** Whether a client error (or its cause) is this client's deadline. */
export const isTimeout = (e: HttpClientError.HttpClientError): boolean => e.cause instanceof DeadlineExceeded

/** One exchange's abort switch and deadline timer; settled once its body is read (or it failed). */
export class Exchange {
  readonly controller = new AbortController()
  private timer: ReturnType<typeof setTimeout> | undefined

  constructor(timeoutMillis: number | undefined) {
    if (timeoutMillis !== undefined) {
      this.timer = setTimeout(() => this.controller.abort(new DeadlineExceeded(`no complete answer within ${timeoutMillis} ms`)), timeoutMillis)
    }
  }

  /** The error that ended the exchange: the deadline when it fired, otherwise what fetch threw. */
  cause(thrown: unknown): unknown {
    const reason: unknown = this.controller.signal.reason
    return this.controller.signal.aborted && reason instanceof DeadlineExceeded ? reason : thrown
  }

  settle() {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
  }

  abort() {
    this.settle()
    this.controller.abort()
  }
}

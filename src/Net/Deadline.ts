/**
 * One exchange's deadline: an AbortSignal that aborts when the time is up or when a parent signal
 * (the caller's interruption, the hub's shutdown) aborts, whichever comes first. A plain timer per
 * exchange rather than a timer fiber, cleared with the parent's listener as soon as the exchange
 * settles (AbortSignal.timeout keeps its timer for the full span, AbortSignal.any its listener on
 * the parent). The reason it aborted with tells a timeout from any other abort.
 */

/** The reason a deadline aborts with when its time is up. */
export class DeadlineExceeded extends Error {
  override readonly name = "DeadlineExceeded"
}

export class Deadline {
  private readonly controller = new AbortController()
  private timer: ReturnType<typeof setTimeout> | undefined
  private parent: AbortSignal | undefined

  /** Without `timeoutMs` only the parent (or `abort`) ends the exchange. */
  constructor(timeoutMs: number | undefined, parent?: AbortSignal) {
    if (parent !== undefined) {
      if (parent.aborted) {
        this.controller.abort(parent.reason)
        return
      }
      this.parent = parent
      parent.addEventListener("abort", this.followParent)
    }
    if (timeoutMs !== undefined) {
      this.timer = setTimeout(
        () => this.abort(new DeadlineExceeded(`no complete answer within ${timeoutMs} ms`)),
        timeoutMs
      )
    }
  }

  private readonly followParent = () => this.abort(this.parent?.reason)

  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** Whether the time ran out (rather than the parent or `abort` ending the exchange). */
  get timedOut(): boolean {
    return this.controller.signal.aborted && this.controller.signal.reason instanceof DeadlineExceeded
  }

  /** Why the exchange failed: the deadline when it fired, otherwise what the exchange threw. */
  cause(thrown: unknown): unknown {
    return this.timedOut ? this.controller.signal.reason : thrown
  }

  /** The exchange is over: the timer and the parent's listener go. */
  settle(): void {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    this.parent?.removeEventListener("abort", this.followParent)
    this.parent = undefined
  }

  /** Ends the exchange now (an interruption); the deadline is settled. */
  abort(reason?: unknown): void {
    this.settle()
    this.controller.abort(reason)
  }
}

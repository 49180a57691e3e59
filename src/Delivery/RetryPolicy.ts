/**
 * When a failed delivery is tried again: the configured schedule (HUB_WEBHOOK_RETRY) with ±20 %
 * jitter so retries of many deliveries do not arrive together, or the receiver's Retry-After when it
 * asks for longer (read by src/Net/RetryAfter.ts, capped at 24 h). After the last delay, or on 410
 * Gone, the delivery is dead.
 */
import { Duration } from "effect"
import type { AttemptResult } from "./Records.js"

export interface FailedAttempt {
  /** The attempt that just failed, counting from 1. */
  readonly attempt: number
  /** Set for a replayed delivery: the attempt after which it is dead rather than retried. */
  readonly finalAttempt: number | null
  readonly schedule: ReadonlyArray<Duration.Duration>
  readonly statusCode: number | null
  readonly retryAfterSeconds: number | undefined
  readonly nowMs: number
  /** A number in [0, 1); Math.random in production, fixed in tests. */
  readonly random: number
}

export const afterFailure = (failed: FailedAttempt): AttemptResult => {
  if (failed.statusCode === 410) return { _tag: "Dead" }
  if (failed.finalAttempt !== null && failed.attempt >= failed.finalAttempt) return { _tag: "Dead" }
  const delay = failed.schedule[failed.attempt - 1]
  if (delay === undefined) return { _tag: "Dead" }
  const jittered = Duration.toMillis(delay) * (0.8 + 0.4 * failed.random)
  const asked = failed.retryAfterSeconds === undefined ? 0 : failed.retryAfterSeconds * 1000
  return { _tag: "RetryAt", at: new Date(failed.nowMs + Math.max(jittered, asked)).toISOString() }
}

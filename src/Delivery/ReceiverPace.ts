/**
 * How fast each webhook's receiver answers, as this process has seen it: a moving average of its
 * attempts' durations (each new one weighs an eighth). A webhook is quick when as many rounds of its
 * attempts as the hand-off may queue ahead of a row (Fairness.HANDOFF_DEPTH) take at most half the
 * lease's margin: then a row handed over behind them still starts well within its lease, and the
 * ingress may hand it over (Admission.ts) rather than queue it for a lease of its own. A webhook
 * whose attempts have not ended yet is not quick. One number per webhook seen since the start.
 * Pure: no Effect, no SQL.
 */
import { HANDOFF_DEPTH } from "./Fairness.js"

export interface ReceiverPace {
  /** An attempt to this webhook ended after `ms`. */
  readonly ended: (webhookId: string, ms: number) => void
  /** Whether this webhook's attempts have lately ended quickly enough to queue rows deep behind them. */
  readonly quick: (webhookId: string) => boolean
}

export const makeReceiverPace = (leaseMarginMs: number): ReceiverPace => {
  const quickUpToMs = leaseMarginMs / 2 / HANDOFF_DEPTH
  const averageMs = new Map<string, number>()
  return {
    ended: (webhookId, ms) => {
      const before = averageMs.get(webhookId)
      averageMs.set(webhookId, before === undefined ? ms : before + (ms - before) / 8)
    },
    quick: (webhookId) => (averageMs.get(webhookId) ?? Infinity) <= quickUpToMs
  }
}

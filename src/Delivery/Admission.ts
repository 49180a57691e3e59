/**
 * The dispatcher's count of attempts in flight (overall and per webhook), and the rule for a new
 * delivery to skip the queue. A delivery the ingress is about to write may be handed straight to
 * this process's dispatcher (written already leased, started once committed: see Handoff.ts) only
 * when that overtakes nothing this process knows to be queued:
 * - a lease has come back short since the last time a row was queued for want of room overall,
 *   so no due row of any webhook below its share was waiting;
 * - its webhook has not had a row queued since then (a webhook at its share at that lease counts as
 *   queued: it may have rows waiting);
 * - the attempt fits within the concurrency overall and the webhook's share.
 * Otherwise the row is queued and leased in due order like any other. First attempts still go
 * before retries, as the lease orders them.
 */
export interface Admission {
  /** Attempts in flight, handed-off deliveries included from the moment they are admitted. */
  readonly running: () => number
  /** A copy of the attempts in flight per webhook id. */
  readonly inFlight: () => Map<string, number>
  /** Whether the last lease found every due row and no row was queued since: a lease now would find none. */
  readonly queueEmpty: () => boolean
  /** Counts one attempt to this webhook as in flight, if a new delivery to it may skip the queue. */
  readonly admit: (webhookId: string) => boolean
  /** Counts leased rows as in flight; `asked` is the lease's limit (a lease that asked nothing tells nothing). */
  readonly leased: (asked: number, webhookIds: ReadonlyArray<string>) => void
  /** One attempt to this webhook ended (or an admitted one will not start). */
  readonly finished: (webhookId: string) => void
  /** No delivery skips the queue from now on (the dispatcher is stopping). */
  readonly close: () => void
}

export const makeAdmission = (limits: { readonly concurrency: number; readonly perWebhook: number }): Admission => {
  const inFlight = new Map<string, number>()
  let running = 0
  let closed = false
  /** Whether the last lease found every due row; false at start, until the first lease says so. */
  let queueClear = false
  /** Webhooks that may have queued rows since that lease: their new rows queue behind them. */
  let behind = new Set<string>()

  const count = (webhookId: string) => {
    inFlight.set(webhookId, (inFlight.get(webhookId) ?? 0) + 1)
    running++
  }

  return {
    running: () => running,
    inFlight: () => new Map(inFlight),
    queueEmpty: () => queueClear && behind.size === 0,
    admit: (webhookId) => {
      const roomOverall = running < limits.concurrency
      if (!closed && queueClear && roomOverall && !behind.has(webhookId) && (inFlight.get(webhookId) ?? 0) < limits.perWebhook) {
        count(webhookId)
        return true
      }
      // The row is queued: what comes after it must not overtake it.
      if (!roomOverall) queueClear = false
      behind.add(webhookId)
      return false
    },
    leased: (asked, webhookIds) => {
      for (const webhookId of webhookIds) count(webhookId)
      if (asked <= 0) return
      // A full lease may have left due rows behind; a short one took every due row it could.
      queueClear = webhookIds.length < asked
      behind = new Set([...inFlight].flatMap(([webhookId, n]) => (n >= limits.perWebhook ? [webhookId] : [])))
    },
    finished: (webhookId) => {
      running--
      const left = (inFlight.get(webhookId) ?? 1) - 1
      if (left <= 0) inFlight.delete(webhookId)
      else inFlight.set(webhookId, left)
    },
    close: () => {
      closed = true
    }
  }
}

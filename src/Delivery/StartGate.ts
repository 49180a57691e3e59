/**
 * The attempts at the receivers: at most the shares' (HUB_DISPATCH_CONCURRENCY overall,
 * HUB_DISPATCH_PER_WEBHOOK, HUB_DISPATCH_PER_ORGANIZATION, by Fairness.ts's rule) are in flight at
 * once; a leased row beyond them waits here until one ends: first attempts before retries, as the
 * lease orders them (a replay's rows wait in the retry lane, so live traffic goes first), each in
 * the order offered, so no row of a webhook overtakes an earlier one of its lane.
 *
 * Why rows wait here at all: the dispatcher leases (and the ingress admits) up to PIPELINE_DEPTH
 * times those shares (Fairness.pipelineShares), because a row's room is taken from its lease until
 * its attempt ends, and on PostgreSQL most of that time is the lease's commit, not the attempt. With
 * the room equal to the shares, one replica drained 3,303–3,893 deliveries/s in overload at 129–136
 * µs of PostgreSQL's CPU a delivery; with four times the room and the receivers' share held here,
 * see docs/PERFORMANCE.md ("Room to lease ahead").
 *
 * A row waits at most until its lease could lapse before its attempt ends (`startBy`: the lease's
 * end less the attempt's timeout); past that it is not started (`lapse`), and its lease expires for
 * any dispatcher to take it, as when a replica stops. Pure: no Effect, no SQL.
 */
import { countDown, countUp, type Owned, roomFor, type Shares } from "./Fairness.js"

/** A leased row offered to start: `start` sends it, `lapse` gives its room back unsent. */
interface Offered {
  readonly delivery: Owned
  /** Whether it is a retry (a replay's rows are): it waits behind every first attempt. */
  readonly retry: boolean
  /** The last moment (ms) its attempt may start and still end within its lease. */
  readonly startBy: number
  readonly start: () => void
  readonly lapse: () => void
}

export interface StartGate {
  /** Starts it now if the shares have room, or once an attempt ends. */
  readonly offer: (offered: Offered) => void
  /** An attempt that `offer` started has ended: the next waiting rows with room start. */
  readonly ended: (delivery: Owned) => void
  /** Attempts at the receivers now. */
  readonly running: () => number
  /** Rows waiting to start. */
  readonly waiting: () => number
  /** Starts nothing more; every waiting row lapses (the dispatcher is stopping). */
  readonly close: () => void
}

export const makeStartGate = (shares: Shares, now: () => number = Date.now): StartGate => {
  const byWebhook = new Map<string, number>()
  const byOrganization = new Map<string, number>()
  let running = 0
  let closed = false
  // First attempts and retries waiting, each in offered order; a started or lapsed row leaves. Small:
  // at most the pipeline's room less the shares.
  const firsts: Array<Offered> = []
  const retries: Array<Offered> = []

  const tryStart = (offered: Offered): boolean => {
    const room = roomFor(shares, running, { byWebhook, byOrganization }, offered.delivery)
    if (!room.overall || !room.owner) return false
    running++
    countUp(byWebhook, offered.delivery.webhook_id)
    countUp(byOrganization, offered.delivery.organization_id)
    offered.start()
    return true
  }

  /**
   * Starts, in order, the waiting rows of `queue` with room, and lapses those past their `startBy`;
   * compacts it in place. Stops looking once no slot is free overall (usually at once: an attempt
   * ended frees one). `start` and `lapse` never call back into the gate synchronously.
   */
  const pumpQueue = (queue: Array<Offered>, at: number) => {
    let kept = 0
    let i = 0
    for (; i < queue.length && running < shares.concurrency; i++) {
      const offered = queue[i]
      if (offered === undefined) continue
      if (at > offered.startBy) offered.lapse()
      else if (!tryStart(offered)) queue[kept++] = offered
    }
    for (; i < queue.length; i++) {
      const offered = queue[i]
      if (offered !== undefined) queue[kept++] = offered
    }
    queue.length = kept
  }

  const pump = () => {
    if (closed || firsts.length + retries.length === 0) return
    const at = now()
    pumpQueue(firsts, at)
    pumpQueue(retries, at)
  }

  return {
    offer: (offered) => {
      if (closed) return offered.lapse()
      // Behind rows of its lane already waiting, so none of its webhook's is overtaken.
      if (offered.retry) retries.push(offered)
      else firsts.push(offered)
      pump()
    },
    ended: (delivery) => {
      running--
      countDown(byWebhook, delivery.webhook_id)
      countDown(byOrganization, delivery.organization_id)
      pump()
    },
    running: () => running,
    waiting: () => firsts.length + retries.length,
    close: () => {
      closed = true
      const lapsed = [...firsts, ...retries]
      firsts.length = 0
      retries.length = 0
      for (const offered of lapsed) offered.lapse()
    }
  }
}

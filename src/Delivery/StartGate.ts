/**
 * The attempts at the receivers: at most the shares' (HUB_DISPATCH_CONCURRENCY overall,
 * HUB_DISPATCH_PER_WEBHOOK, HUB_DISPATCH_PER_ORGANIZATION, by Fairness.ts's rule) are in flight at
 * once; a leased row beyond them waits here until one ends: first attempts before retries, as the
 * lease orders them (a replay's rows wait in the retry lane, so live traffic goes first), and a
 * webhook's rows of each kind in the order offered, so none overtakes an earlier one of its webhook.
 * With slots scarce, the waiting webhooks take freed slots in turn.
 *
 * Why rows wait here at all: the dispatcher leases (and the ingress admits) up to four times those
 * shares ahead (Fairness.pipelineDepth), so that the next rows are its own while a lease commits,
 * and the ingress up to 32 times for a webhook whose receiver answers quickly (Admission.ts).
 *
 * A row waits at most until its lease could lapse before its attempt ends (`startBy`: the lease's
 * end less the attempt's timeout); past that it is not started (`lapse`), and its lease expires for
 * any dispatcher to take it, as when a replica stops. Pure: no Effect, no SQL.
 */
import { makeOwnedCounts, type Owned, roomFor, type Shares } from "./Fairness.js"

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

/** A webhook's rows waiting, each kind in offered order. */
interface Waiting {
  readonly firsts: Array<Offered>
  readonly retries: Array<Offered>
}

export const makeStartGate = (shares: Shares, now: () => number = Date.now): StartGate => {
  const attempts = makeOwnedCounts()
  let waiting = 0
  let closed = false
  // The webhooks with rows waiting, in the order they began to wait. Looked at by the head of each
  // (not row by row: in overload hundreds wait behind their webhooks' shares, and a scan of every
  // row at each attempt's end took 14 % of the hub's thread on SQLite).
  const lanes = new Map<string, Waiting>()

  const tryStart = (offered: Offered): boolean => {
    const room = roomFor(shares, attempts.total(), attempts, offered.delivery)
    if (!room.overall || !room.owner) return false
    attempts.add(offered.delivery)
    offered.start()
    return true
  }

  /**
   * Starts rows from the front of `queue` while they have room; lapses those past their `startBy`.
   * Whether it started any.
   */
  const startFront = (queue: Array<Offered>, at: number) => {
    let started = false
    for (let head = queue[0]; head !== undefined; head = queue[0]) {
      if (at <= head.startBy && !tryStart(head)) return started
      queue.shift()
      waiting--
      if (at > head.startBy) head.lapse()
      else started = true
    }
    return started
  }

  /**
   * Every webhook's first attempts, then every webhook's retries, each from the front while there
   * is room; stops once no slot is free overall. A webhook that started a row goes to the end of
   * the order, so a slot freed overall goes to each waiting webhook in turn: else, with slots
   * scarce, the webhooks first in the order took every freed slot back for their own next rows
   * while they had any (up to Fairness.HANDOFF_DEPTH times their share), and a later webhook's
   * rows waited, or lapsed, until those lanes ran dry. `start` and `lapse` never call back into
   * the gate synchronously. (A lane moved to the end is visited again in the same pass, as a Map
   * visits entries added while it is iterated; by then it has no room, or takes what is left.)
   */
  const pump = () => {
    if (closed || waiting === 0) return
    const at = now()
    for (const kind of ["firsts", "retries"] as const) {
      for (const [webhookId, lane] of lanes) {
        if (attempts.total() >= shares.concurrency) return
        const started = startFront(lane[kind], at)
        if (lane.firsts.length === 0 && lane.retries.length === 0) lanes.delete(webhookId)
        else if (started) {
          lanes.delete(webhookId)
          lanes.set(webhookId, lane)
        }
      }
    }
  }

  return {
    offer: (offered) => {
      if (closed) return offered.lapse()
      const webhookId = offered.delivery.webhook_id
      let lane = lanes.get(webhookId)
      if (lane === undefined) {
        lane = { firsts: [], retries: [] }
        lanes.set(webhookId, lane)
      }
      // Behind its webhook's rows of its kind already waiting, so none is overtaken.
      if (offered.retry) lane.retries.push(offered)
      else lane.firsts.push(offered)
      waiting++
      pump()
    },
    ended: (delivery) => {
      attempts.remove(delivery)
      pump()
    },
    running: attempts.total,
    waiting: () => waiting,
    close: () => {
      closed = true
      const lapsed = [...lanes.values()].flatMap((lane) => [...lane.firsts, ...lane.retries])
      lanes.clear()
      waiting = 0
      for (const offered of lapsed) offered.lapse()
    }
  }
}

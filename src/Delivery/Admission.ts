/**
 * The dispatcher's count of attempts in flight (overall, per webhook and per organization), and the
 * rule for a new delivery to skip the queue. The shares themselves are Fairness.ts's, the same the
 * lease applies (Lease.ts).
 * A delivery the ingress is about to write may be handed straight to this process's dispatcher
 * (written already leased, started once committed: see Handoff.ts) only when that overtakes nothing
 * this process knows to be queued:
 * - a lease has come back short since the last time a row was queued for want of room overall,
 *   so no due row of any webhook below its share was waiting;
 * - its webhook, and its organization, have not had a row queued since then (a webhook that is not
 *   quick, at its share at that lease, counts as queued: it may have rows waiting);
 * - the attempt fits within the concurrency overall, the webhook's share and the organization's (or
 *   the idle slots an organization past its share may take).
 * Otherwise the row is queued and leased in due order like any other. First attempts still go
 * before retries, as the lease orders them.
 * The room is the lease's (the shares, Fairness.pipelineDepth times) for most webhooks, and deeper
 * (Fairness.HANDOFF_DEPTH times) for one whose receiver answers quickly (ReceiverPace.ts): rows
 * handed over for it start within their leases all the same, and the ingress then rarely has to
 * queue a row under overload (docs/PERFORMANCE.md, "Deep hand-off for quick receivers"). A quick
 * webhook at the lease's share after a lease counts as behind only if this process queued a row
 * of it since the lease before (a refusal marks it behind until a short lease finds it below the
 * lease's share, so its queued rows go first); a row of it queued elsewhere (by another replica, or
 * a lapsed lease) may wait while this process holds more of it than the lease's share, and is taken
 * as soon as it holds less. An organization at its share after a lease, with slots scarce, counts
 * as behind in the same way: only if this process queued a row for want of its room since. Its
 * webhooks' rows queued for want of their own share keep theirs queued as above; a row of another
 * of its webhooks queued elsewhere may be overtaken until the next lease that finds room for it.
 * A row of a webhook that is not quick is admitted against the lease's room as the rows leased and
 * handed over for such webhooks fill it: the rows handed over for quick webhooks are bounded by the
 * deeper room alone. Else the quick webhooks' rows filled the lease's room under overload, a row of
 * any other webhook then queued for want of room overall (or its organization's), and every
 * webhook's hand-off stopped, the quick ones' too, until the quick rows drained below it (one
 * replica on PostgreSQL then fell behind its ingress: docs/PERFORMANCE.md, "A slower tenant beside
 * quick ones"). The lease itself still takes what every row held leaves of its room: asked for
 * more than the webhooks' shares (which count every row) let it take, it came back short with rows
 * still queued, and the dispatcher then leased only at its poll. The gate (StartGate.ts) gives the
 * waiting webhooks freed slots in turn, so a row does not wait behind another webhook's deep rows.
 */
import {
  atShare,
  countDown,
  countUp,
  makeOwnedCounts,
  overShareLimit,
  type Owned,
  roomFor,
  type Shares
} from "./Fairness.js"

export interface Admission {
  /** Attempts in flight, handed-off deliveries included from the moment they are admitted. */
  readonly running: () => number
  /** A copy of the attempts in flight per webhook id. */
  readonly inFlight: () => Map<string, number>
  /** A copy of the attempts in flight per organization id. */
  readonly inFlightByOrganization: () => Map<string, number>
  /** How many more attempts organizations past their share may start now, in all. */
  readonly overShareRoom: () => number
  /** Whether the last lease found every due row and no row was queued since: a lease now would find none. */
  readonly queueEmpty: () => boolean
  /** Counts one attempt to this webhook as in flight, if a new delivery to it may skip the queue. */
  readonly admit: (webhookId: string, organizationId: string) => boolean
  /** Counts leased rows as in flight; `asked` is the lease's limit (a lease that asked nothing tells nothing). */
  readonly leased: (asked: number, deliveries: ReadonlyArray<Owned>) => void
  /** One attempt to this webhook ended (or an admitted one will not start). */
  readonly finished: (delivery: Owned) => void
  /** No delivery skips the queue from now on (the dispatcher is stopping). */
  readonly close: () => void
}

/** The deeper room of webhooks whose receivers answer quickly. */
export interface DeepRoom {
  readonly shares: Shares
  readonly quick: (webhookId: string) => boolean
}

export const makeAdmission = (limits: Shares, deep?: DeepRoom): Admission => {
  /** Every row this process holds. */
  const counts = makeOwnedCounts()
  const { byWebhook, byOrganization } = counts
  /** Of those, the rows leased and those handed over for webhooks not quick: what such a webhook's row is admitted against. */
  const inLeaseRoom = makeOwnedCounts()
  /** The rest: per webhook, the rows handed over for it as a quick one (the deeper room's). */
  const deepByWebhook = new Map<string, number>()
  const add = (delivery: Owned, deeper: boolean) => {
    counts.add(delivery)
    if (deeper) countUp(deepByWebhook, delivery.webhook_id)
    else inLeaseRoom.add(delivery)
  }
  // Rows of one webhook are alike to the count: an ended one is taken from its deeper rows first.
  const remove = (delivery: Owned) => {
    counts.remove(delivery)
    if (deepByWebhook.has(delivery.webhook_id)) countDown(deepByWebhook, delivery.webhook_id)
    else inLeaseRoom.remove(delivery)
  }
  const overShareUpTo = overShareLimit(limits.concurrency)
  const quick = (webhookId: string) => deep?.quick(webhookId) === true
  let closed = false
  /** Whether the last lease found every due row; false at start, until the first lease says so. */
  let queueClear = false
  /** Webhooks and organizations that may have queued rows since that lease: their new rows queue behind them. */
  let behind = new Set<string>()
  let organizationsBehind = new Set<string>()

  return {
    running: counts.total,
    inFlight: () => new Map(byWebhook),
    inFlightByOrganization: () => new Map(byOrganization),
    overShareRoom: () => Math.max(0, overShareUpTo - counts.total()),
    queueEmpty: () => queueClear && behind.size === 0 && organizationsBehind.size === 0,
    admit: (webhookId, organizationId) => {
      const delivery = { webhook_id: webhookId, organization_id: organizationId }
      const deeper = deep !== undefined && quick(webhookId)
      const room = deeper
        ? roomFor(deep.shares, counts.total(), counts, delivery)
        : roomFor(limits, inLeaseRoom.total(), { byWebhook, byOrganization: inLeaseRoom.byOrganization }, delivery)
      if (
        !closed && queueClear && room.overall && room.owner && !behind.has(webhookId) &&
        !organizationsBehind.has(organizationId)
      ) {
        add(delivery, deeper)
        return true
      }
      // The row is queued: what comes after it must not overtake it (the organization's rows too, when
      // its share is what held it back).
      if (!room.overall) queueClear = false
      behind.add(webhookId)
      if (!room.organization) organizationsBehind.add(organizationId)
      return false
    },
    leased: (asked, deliveries) => {
      for (const delivery of deliveries) add(delivery, false)
      if (asked <= 0) return
      // A full lease may have left due rows behind; a short one took every due row it could.
      queueClear = deliveries.length < asked
      // At its share the lease took none of a webhook's rows. A quick webhook holds more than that
      // share through the hand-off, and counts as behind only if this process queued a row of it
      // since the last lease: else every lease would stop its hand-off.
      const before = behind
      behind = new Set(
        atShare(byWebhook, limits.perWebhook).filter((webhookId) => before.has(webhookId) || !quick(webhookId))
      )
      // Below the limit, an organization at its share could have taken more: it left nothing waiting.
      // At it, the organization counts as behind only if this process queued a row for want of its
      // room since the lease before, as a quick webhook: else, with every slot scarce, each lease
      // stopped the hand-off of a busy organization's every webhook (two replicas fell behind their
      // ingress for it: docs/PERFORMANCE.md, "Deep hand-off for quick receivers").
      const organizationsBefore = organizationsBehind
      organizationsBehind = counts.total() < overShareUpTo
        ? new Set()
        : new Set(
          atShare(byOrganization, limits.perOrganization).filter((organizationId) =>
            organizationsBefore.has(organizationId)
          )
        )
    },
    finished: remove,
    close: () => {
      closed = true
    }
  }
}

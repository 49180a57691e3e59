/**
 * The dispatcher's count of attempts in flight (overall, per webhook and per organization), and the
 * rule for a new delivery to skip the queue. Per organization as well as per webhook: one
 * organization's slow receivers (many webhooks each holding its share at the timeout) cannot hold
 * every dispatch slot, so another organization's deliveries still start at once. The organization's
 * share binds only when slots are scarce: past it, an organization may still take idle slots while
 * a quarter of all slots stays free (`overShareLimit`), so a hub serving one organization is not
 * held to its share, and a newcomer still finds that quarter free at once. The lease applies the
 * same rule (Lease.ts), giving idle slots to organizations past their share only after every
 * organization within its share has had its due rows.
 * A delivery the ingress is about to write may be handed straight to this process's dispatcher
 * (written already leased, started once committed: see Handoff.ts) only when that overtakes nothing
 * this process knows to be queued:
 * - a lease has come back short since the last time a row was queued for want of room overall,
 *   so no due row of any webhook below its share was waiting;
 * - its webhook, and its organization, have not had a row queued since then (one at its share at
 *   that lease counts as queued: it may have rows waiting);
 * - the attempt fits within the concurrency overall, the webhook's share and the organization's (or
 *   the idle slots an organization past its share may take).
 * Otherwise the row is queued and leased in due order like any other. First attempts still go
 * before retries, as the lease orders them.
 */
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

/** What a count needs of a delivery: whose it is. */
export interface Owned {
  readonly webhook_id: string
  readonly organization_id: string
}

export interface AdmissionLimits {
  readonly concurrency: number
  readonly perWebhook: number
  readonly perOrganization: number
}

const up = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)

const down = (counts: Map<string, number>, key: string) => {
  const left = (counts.get(key) ?? 1) - 1
  if (left <= 0) counts.delete(key)
  else counts.set(key, left)
}

const atShare = (counts: ReadonlyMap<string, number>, share: number) =>
  new Set([...counts].flatMap(([key, n]) => (n >= share ? [key] : [])))

/**
 * The attempts in flight overall below which an organization past its share may still start one:
 * all slots but a quarter, which stays free for organizations within their share.
 */
export const overShareLimit = (concurrency: number) => concurrency - Math.ceil(concurrency / 4)

export const makeAdmission = (limits: AdmissionLimits): Admission => {
  const byWebhook = new Map<string, number>()
  const byOrganization = new Map<string, number>()
  const overShareUpTo = overShareLimit(limits.concurrency)
  let running = 0
  let closed = false
  /** Whether the last lease found every due row; false at start, until the first lease says so. */
  let queueClear = false
  /** Webhooks and organizations that may have queued rows since that lease: their new rows queue behind them. */
  let behind = new Set<string>()
  let organizationsBehind = new Set<string>()

  const count = (delivery: Owned) => {
    up(byWebhook, delivery.webhook_id)
    up(byOrganization, delivery.organization_id)
    running++
  }

  return {
    running: () => running,
    inFlight: () => new Map(byWebhook),
    inFlightByOrganization: () => new Map(byOrganization),
    overShareRoom: () => Math.max(0, overShareUpTo - running),
    queueEmpty: () => queueClear && behind.size === 0 && organizationsBehind.size === 0,
    admit: (webhookId, organizationId) => {
      const roomOverall = running < limits.concurrency
      const roomForOrganization = (byOrganization.get(organizationId) ?? 0) < limits.perOrganization || running < overShareUpTo
      const roomForOwner = (byWebhook.get(webhookId) ?? 0) < limits.perWebhook && roomForOrganization
      if (!closed && queueClear && roomOverall && roomForOwner && !behind.has(webhookId) && !organizationsBehind.has(organizationId)) {
        count({ webhook_id: webhookId, organization_id: organizationId })
        return true
      }
      // The row is queued: what comes after it must not overtake it (the organization's rows too, when
      // its share is what held it back).
      if (!roomOverall) queueClear = false
      behind.add(webhookId)
      if (!roomForOrganization) organizationsBehind.add(organizationId)
      return false
    },
    leased: (asked, deliveries) => {
      for (const delivery of deliveries) count(delivery)
      if (asked <= 0) return
      // A full lease may have left due rows behind; a short one took every due row it could.
      queueClear = deliveries.length < asked
      behind = atShare(byWebhook, limits.perWebhook)
      // Below the limit, an organization at its share could have taken more: it left nothing waiting.
      organizationsBehind = running < overShareUpTo ? new Set() : atShare(byOrganization, limits.perOrganization)
    },
    finished: (delivery) => {
      running--
      down(byWebhook, delivery.webhook_id)
      down(byOrganization, delivery.organization_id)
    },
    close: () => {
      closed = true
    }
  }
}

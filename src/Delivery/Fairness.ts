/**
 * The fairness rule, in one place for the hand-off (Admission.ts) and the lease (Lease.ts): no tenant
 * holds every dispatch slot. Each webhook may have at most `perWebhook` attempts in flight, and each
 * organization `perOrganization` (one organization's slow receivers, many webhooks each holding its
 * share at the timeout, cannot take every slot). The organization's share binds only when slots are
 * scarce: past it, an organization may still take idle slots while a quarter of all slots stays free
 * (`overShareLimit`), so a hub serving one organization is not held to its share, and a newcomer
 * still finds that quarter free at once. The lease gives those idle slots to organizations past their
 * share only after every organization within its share has had its due rows.
 * Pure: counts in, decisions out (no Effect, no SQL).
 */

export interface Shares {
  /** Attempts in flight at most, in all. */
  readonly concurrency: number
  readonly perWebhook: number
  readonly perOrganization: number
}

/** Attempts in flight per webhook id and per organization id. */
export interface InFlight {
  readonly byWebhook: ReadonlyMap<string, number>
  readonly byOrganization: ReadonlyMap<string, number>
}

/** Whose a delivery is: what its attempt counts against. */
export interface Owned {
  readonly webhook_id: string
  readonly organization_id: string
}

/**
 * How many times the shares a dispatcher leases and admits ahead of its attempts: a row's room is
 * taken from its lease to its attempt's end, and on PostgreSQL most of that is the lease's commit,
 * so with room equal to the shares one replica fell behind its ingress (docs/PERFORMANCE.md, "Room
 * to lease ahead"). The receivers still see at most the shares at once (StartGate.ts). A row waits
 * behind at most `depth - 1` rounds of its webhook's attempts, each within the timeout, so it starts
 * within its lease's margin (HUB_DISPATCH_LEASE_MARGIN) even when every attempt takes the whole
 * timeout: 1 + margin / timeout, at most 4 (the defaults, 30 s and 10 s, give 4: what was measured).
 */
export const pipelineDepth = (timeoutMs: number, marginMs: number): number =>
  Math.max(1, Math.min(4, 1 + Math.floor(marginMs / Math.max(1, timeoutMs))))

/**
 * How many times the shares the ingress may hand over to this process's dispatcher for webhooks
 * whose receivers answer quickly (ReceiverPace.ts), beyond what the lease takes (pipelineDepth).
 * Under overload the ingress accepts more than the dispatcher drains; once a row of a webhook is
 * queued, the webhook's later rows queue behind it and each needs a lease of its own, a third
 * version of its row. With room for 4 times the shares one replica on PostgreSQL fell behind in
 * most runs (115–161 µs of PostgreSQL a delivery, 3,700 WAL bytes); with 32 times for quick
 * receivers it kept up in every run (64–94 µs, 2,770–2,840 bytes): docs/PERFORMANCE.md, "Deep
 * hand-off for quick receivers". At most 8,192 rows in memory with the default shares.
 */
export const HANDOFF_DEPTH = 32

/** The room a dispatcher leases and admits within: the shares, `depth` times. */
export const pipelineShares = (shares: Shares, depth: number): Shares => ({
  concurrency: shares.concurrency * depth,
  perWebhook: shares.perWebhook * depth,
  perOrganization: shares.perOrganization * depth
})

/**
 * The attempts in flight overall below which an organization past its share may still start one:
 * all slots but a quarter, which stays free for organizations within their share.
 */
export const overShareLimit = (concurrency: number) => concurrency - Math.ceil(concurrency / 4)

/** The keys whose count has reached `share`. */
export const atShare = (counts: ReadonlyMap<string, number>, share: number): ReadonlyArray<string> =>
  [...counts].flatMap(([key, n]) => (n >= share ? [key] : []))

export const countUp = (counts: Map<string, number>, key: string) => counts.set(key, (counts.get(key) ?? 0) + 1)

export const countDown = (counts: Map<string, number>, key: string) => {
  const left = (counts.get(key) ?? 1) - 1
  if (left <= 0) counts.delete(key)
  else counts.set(key, left)
}

/** Counts kept overall, per webhook and per organization (the admission's room, the gate's attempts). */
export interface OwnedCounts extends InFlight {
  readonly total: () => number
  readonly add: (delivery: Owned) => void
  readonly remove: (delivery: Owned) => void
}

export const makeOwnedCounts = (): OwnedCounts => {
  const byWebhook = new Map<string, number>()
  const byOrganization = new Map<string, number>()
  let total = 0
  return {
    byWebhook,
    byOrganization,
    total: () => total,
    add: (delivery) => {
      countUp(byWebhook, delivery.webhook_id)
      countUp(byOrganization, delivery.organization_id)
      total++
    },
    remove: (delivery) => {
      countDown(byWebhook, delivery.webhook_id)
      countDown(byOrganization, delivery.organization_id)
      total--
    }
  }
}

/** The counts with these deliveries' attempts added (copies). */
export const withAttempts = (inFlight: InFlight, deliveries: ReadonlyArray<Owned>) => {
  const byWebhook = new Map(inFlight.byWebhook)
  const byOrganization = new Map(inFlight.byOrganization)
  for (const delivery of deliveries) {
    countUp(byWebhook, delivery.webhook_id)
    countUp(byOrganization, delivery.organization_id)
  }
  return { byWebhook, byOrganization }
}

/** Whether some webhook or organization has reached its share. */
export const anyAtShare = (inFlight: InFlight, shares: Omit<Shares, "concurrency">) =>
  atShare(inFlight.byWebhook, shares.perWebhook).length > 0 ||
  atShare(inFlight.byOrganization, shares.perOrganization).length > 0

/**
 * Whether one more attempt to this webhook of this organization may start, with `running` in flight:
 * room overall, room within the organization's share (or the idle slots past it), and room for the
 * owner (the webhook's share and the organization's).
 */
export const roomFor = (shares: Shares, running: number, inFlight: InFlight, delivery: Owned) => {
  const overall = running < shares.concurrency
  const organization = (inFlight.byOrganization.get(delivery.organization_id) ?? 0) < shares.perOrganization ||
    running < overShareLimit(shares.concurrency)
  const owner = (inFlight.byWebhook.get(delivery.webhook_id) ?? 0) < shares.perWebhook && organization
  return { overall, organization, owner }
}

/**
 * How many rows of this webhook the lease may still take: what its share leaves, and what its
 * organization's share leaves or, past it, the idle slots left to organizations past theirs.
 */
export const rowsLeft = (
  shares: Omit<Shares, "concurrency">,
  inFlight: InFlight,
  overShareRoom: number,
  delivery: Owned
) => {
  const organizationLeft = shares.perOrganization - (inFlight.byOrganization.get(delivery.organization_id) ?? 0)
  return Math.min(
    shares.perWebhook - (inFlight.byWebhook.get(delivery.webhook_id) ?? 0),
    Math.max(organizationLeft, overShareRoom)
  )
}

/** A due row, as the lease orders it: first attempts (phase 0) before retries (phase 1), each by due time. */
export interface DueRow extends Owned {
  readonly id: string
  readonly phase: number
  readonly next_attempt_at: string
}

/** What picking needs: how many rows, the shares, what is in flight, and the idle slots organizations past their share may take. */
export interface PickRequest extends InFlight {
  readonly limit: number
  readonly perWebhook: number
  readonly perOrganization: number
  readonly overShareRoom: number
}

/**
 * The rows to lease, at most `limit`, ids once each, each webhook within what its share leaves: in
 * due order every organization within its share first, then organizations past it, in due order,
 * up to `overShareRoom` rows. `overShare` says how many of the picked rows were those.
 */
export const pickWithinShares = <Row extends DueRow>(rows: ReadonlyArray<Row>, input: PickRequest) => {
  const ordered = [...rows].sort((a, b) =>
    a.phase - b.phase || a.next_attempt_at.localeCompare(b.next_attempt_at) || a.id.localeCompare(b.id)
  )
  const byWebhook = new Map(input.byWebhook)
  const byOrganization = new Map(input.byOrganization)
  const picked: Array<Row> = []
  const seen = new Set<string>()
  const pass = (mayTake: (row: Row) => boolean, most: number) => {
    let taken = 0
    for (const row of ordered) {
      if (picked.length >= input.limit || taken >= most) return taken
      const forWebhook = byWebhook.get(row.webhook_id) ?? 0
      if (seen.has(row.id) || forWebhook >= input.perWebhook || !mayTake(row)) continue
      seen.add(row.id)
      byWebhook.set(row.webhook_id, forWebhook + 1)
      countUp(byOrganization, row.organization_id)
      picked.push(row)
      taken++
    }
    return taken
  }
  pass((row) => (byOrganization.get(row.organization_id) ?? 0) < input.perOrganization, input.limit)
  const overShare = pass(() => true, input.overShareRoom)
  return { picked, overShare }
}

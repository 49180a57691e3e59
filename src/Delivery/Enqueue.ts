/**
 * Queues new deliveries, in the transaction that stores their events: one pending row per active
 * webhook of each event's instance that takes any of its changes (a filtered webhook that takes
 * only some gets a body of its own; every other delivery reads its event's). The outbox answers with
 * the webhooks and writes the rows; the dispatcher's intake, if one runs, is asked of each row
 * whether it may skip the queue (Handoff.ts): an admitted row is written leased to the dispatcher
 * and added to `handedOver`, so the caller starts it once committed, or gives its room back if the
 * transaction fails. A webhook with per-person order (`per_contact`) gets one delivery per person
 * its changes concern, each placed in its person's lane (Lanes.ts): held while one is ahead of it.
 */
import { Effect } from "effect"
import { LRUCache } from "lru-cache"
import { kindsOf, parseFilter, selectChanges } from "../Domain/EventKinds.js"
import { newId } from "../Domain/Ids.js"
import type { DispatcherIntake } from "./Handoff.js"
import { laneName } from "./Lanes.js"
import { OutboxRepo } from "./Outbox.js"
import type { EventRecord, LeasedDelivery, NewDeliveryRow, QueueingWebhook } from "./Records.js"

/** Parsed event filters, by their stored text (a handful of distinct ones). */
const filters = new LRUCache<string, ReadonlySet<string>>({ max: 1_000 })

const filterOf = (stored: string) => {
  const known = filters.get(stored)
  if (known !== undefined) return known
  const parsed: ReadonlySet<string> = new Set(parseFilter(stored) ?? [])
  filters.set(stored, parsed)
  return parsed
}

/** Whether a webhook's stored filter names `kind` itself (a webhook without filter names none). */
const namesKind = (filter: string | null, kind: string) => filter !== null && filterOf(filter).has(kind)

/** What a webhook takes of an event: the body (null for the whole event) and the changes' indices (undefined for all). */
interface Taken {
  readonly body: string | null
  readonly indices: ReadonlyArray<number> | undefined
}

const wholeEvent: Taken = { body: null, indices: undefined }

/**
 * For each event, what a filtered webhook takes of it: the whole event (as every unfiltered
 * webhook), some of its changes, or undefined for none. Kinds are worked out only for events some
 * filtered webhook may take, once per event; bodies once per event and filter.
 */
const selector = (event: EventRecord) => {
  let kinds: ReadonlyArray<ReadonlyArray<string>> | undefined
  let taken: Map<string, Taken | undefined> | undefined
  return (filter: string | null): Taken | undefined => {
    const parts = event.filterable
    if (filter === null || parts === undefined) return wholeEvent
    taken ??= new Map()
    if (taken.has(filter)) return taken.get(filter)
    kinds ??= parts.changes.map((change) => kindsOf(change.field, change.value))
    const selected = selectChanges(filterOf(filter), kinds)
    const result = selected === "all"
      ? wholeEvent
      : selected === "none"
      ? undefined
      : { body: parts.bodyOf(selected), indices: selected }
    taken.set(filter, result)
    return result
  }
}

/**
 * The body a webhook with this stored filter takes of the event: null for the whole event, undefined
 * for none of it (a hub event goes only to webhooks naming its kind). A replay and a poll select
 * stored events with it as the ingress selects new ones.
 */
export const bodyFor = (event: EventRecord, filter: string | null): string | null | undefined => {
  if (event.onlyToNamed !== undefined && !namesKind(filter, event.onlyToNamed)) return undefined
  const taken = selector(event)(filter)
  return taken === undefined ? undefined : taken.body
}

/** A delivery to write: to this webhook, of this event, with its body and, with per-person order, its person. */
interface Planned {
  readonly webhook: QueueingWebhook
  readonly event: EventRecord
  readonly body: string | null
  readonly person: string | null
}

/**
 * The deliveries of an event to a webhook: one, or with per-person order one per person the
 * changes it takes concern (and one for those concerning no one), each waiting in its person's lane.
 */
const planned = (webhook: QueueingWebhook, event: EventRecord, taken: Taken): ReadonlyArray<Planned> => {
  const byPerson = event.filterable?.byPerson
  if (webhook.ordering !== "per_contact" || byPerson === undefined) {
    return [{ webhook, event, body: taken.body, person: null }]
  }
  return byPerson(taken.indices).map((part) => ({
    webhook,
    event,
    body: part.body ?? taken.body,
    person: part.person
  }))
}

/** The lease an admitted row is written with: this dispatcher's, for as long as its leases last. */
interface HandOffLease {
  readonly owner: string
  readonly leaseUntil: string
}

const leaseOf = (intake: DispatcherIntake | undefined): HandOffLease | undefined =>
  intake === undefined
    ? undefined
    : { owner: intake.owner, leaseUntil: new Date(Date.now() + intake.leaseMs).toISOString() }

/** An admitted row as the dispatcher starts it, with what it takes to send it. */
const handedOff = (
  row: NewDeliveryRow,
  webhook: QueueingWebhook,
  event: EventRecord,
  lease: HandOffLease
): LeasedDelivery => ({
  id: row.id,
  webhook_id: webhook.id,
  event_id: event.id,
  traceparent: event.traceparent ?? null,
  organization_id: webhook.organization_id,
  contact_key: row.contact_key,
  message_id: row.message_id,
  status: "pending",
  attempts: 0,
  final_attempt: null,
  // Handed off only when due: from its creation.
  next_attempt_at: row.created_at,
  lease_expires_at: lease.leaseUntil,
  body: row.body ?? event.body,
  url: webhook.url,
  webhook_active: true,
  webhook_failing_since: webhook.failing_since,
  secret_encrypted: webhook.secret_encrypted,
  previous_secret_encrypted: webhook.previous_secret_encrypted,
  previous_secret_expires_at: webhook.previous_secret_expires_at,
  headers: webhook.headers,
  headers_encrypted: webhook.headers_encrypted
})

/** Where a planned delivery goes in its person's lane; undefined for one in no lane. */
interface LanePlace {
  readonly seq: number
  /** Whether a delivery of the lane is ahead of it: then it waits, with no due time. */
  readonly held: boolean
}

/**
 * Places the planned deliveries in their lanes, in order, behind what each lane holds (read and
 * locked by `laneTails`); in step with `plan`.
 */
const placesIn = (plan: ReadonlyArray<Planned>, tails: ReadonlyMap<string, number>) => {
  const last = new Map(tails)
  return plan.map((p): LanePlace | undefined => {
    if (p.person === null) return undefined
    const name = laneName({ webhookId: p.webhook.id, person: p.person })
    const before = last.get(name)
    last.set(name, (before ?? 0) + 1)
    return { seq: (before ?? 0) + 1, held: before !== undefined }
  })
}

/**
 * A new delivery row: held behind its person's lane (no due time, never handed off), else written
 * leased to the dispatcher if its intake admits it (then added to `handedOver`), else queued.
 */
const deliveryRow = (
  p: Planned,
  place: LanePlace | undefined,
  now: string,
  handOff: {
    readonly intake: DispatcherIntake | undefined
    readonly lease: HandOffLease | undefined
    readonly handedOver: Array<LeasedDelivery>
  },
  id = newId("dlv")
): NewDeliveryRow => {
  const { webhook, event } = p
  const held = place?.held === true
  const lease = !held && handOff.intake !== undefined && handOff.intake.admit(webhook.id, webhook.organization_id)
    ? handOff.lease
    : undefined
  const row: NewDeliveryRow = {
    id,
    webhook_id: webhook.id,
    event_id: event.id,
    message_id: newId("msg"),
    status: "pending",
    attempts: 0,
    // A pending row is due from its creation (the list of pending rows relies on it), unless held.
    next_attempt_at: held ? null : now,
    lease_owner: lease?.owner ?? null,
    lease_expires_at: lease?.leaseUntil ?? null,
    created_at: now,
    updated_at: now,
    body: p.body,
    contact_key: place === undefined ? null : p.person,
    contact_seq: place?.seq ?? null
  }
  if (lease !== undefined) handOff.handedOver.push(handedOff(row, webhook, event, lease))
  return row
}

/** What the ingress's group has done already, or leaves to the enqueue (one round trip fewer each, on PostgreSQL). */
interface EnqueueOptions {
  /** The active webhooks of the events' instances, read already (with the group's routes). */
  readonly webhooks?: ReadonlyArray<QueueingWebhook>
  /** The events' own rows are written here, with their deliveries. */
  readonly writeEvents?: boolean
}

export class Enqueue extends Effect.Service<Enqueue>()("Enqueue", {
  effect: Effect.map(OutboxRepo, (outbox) => ({
    /**
     * One pending delivery per active webhook of each event's instance that takes any of its
     * changes; returns how many per event id.
     */
    events: (
      events: ReadonlyArray<EventRecord>,
      now: string,
      intake: DispatcherIntake | undefined,
      handedOver: Array<LeasedDelivery>,
      options?: EnqueueOptions
    ): Effect.Effect<ReadonlyMap<string, number>> =>
      Effect.gen(function*() {
        if (events.length === 0) return new Map<string, number>()
        const handOff = { intake, lease: leaseOf(intake), handedOver }
        const webhooks = options?.webhooks ??
          (yield* outbox.queueingWebhooks([...new Set(events.map((e) => e.instanceId))]))
        const plan = events.flatMap((event) => {
          const takenBy = selector(event)
          return webhooks.flatMap((webhook) => {
            if (webhook.instance_id !== event.instanceId) return []
            if (event.onlyToNamed !== undefined && !namesKind(webhook.events, event.onlyToNamed)) return []
            const taken = takenBy(webhook.events)
            // An event with no change the webhook takes makes no delivery for it.
            return taken === undefined ? [] : planned(webhook, event, taken)
          })
        })
        const lanes = plan.flatMap((p) => (p.person === null ? [] : [{ webhookId: p.webhook.id, person: p.person }]))
        const places = placesIn(plan, yield* outbox.laneTails(lanes))
        const rows = plan.map((p, i) => deliveryRow(p, places[i], now, handOff))
        yield* outbox.insertDeliveries(rows, options?.writeEvents === true ? { events, now } : undefined)
        const counts = new Map<string, number>()
        for (const row of rows) counts.set(row.event_id, (counts.get(row.event_id) ?? 0) + 1)
        return counts
      }),
    /**
     * One pending delivery of `event` to this webhook alone, whatever kinds it takes (a test event),
     * with the given id; false when the webhook is not active.
     */
    toWebhook: (
      webhookId: string,
      event: EventRecord,
      deliveryId: string,
      now: string,
      intake: DispatcherIntake | undefined,
      handedOver: Array<LeasedDelivery>
    ): Effect.Effect<boolean> =>
      Effect.gen(function*() {
        const webhook = yield* outbox.queueingWebhook(webhookId)
        if (webhook === undefined) return false
        yield* outbox.insertDeliveries([
          deliveryRow(
            { webhook, event, body: null, person: null },
            undefined,
            now,
            { intake, lease: leaseOf(intake), handedOver },
            deliveryId
          )
        ])
        return true
      })
  })),
  dependencies: [OutboxRepo.Default]
}) {}

/**
 * Queues new deliveries, in the transaction that stores their events: one pending row per active
 * webhook of each event's instance that takes any of its changes (a filtered webhook that takes
 * only some gets a body of its own; every other delivery reads its event's). The outbox answers with
 * the webhooks and writes the rows; the dispatcher's intake, if one runs, is asked of each row
 * whether it may skip the queue (Handoff.ts): an admitted row is written leased to the dispatcher
 * and added to `handedOver`, so the caller starts it once committed, or gives its room back if the
 * transaction fails.
 */
import { Effect } from "effect"
import { LRUCache } from "lru-cache"
import { kindsOf, parseFilter, selectChanges } from "../Domain/EventKinds.js"
import { newId } from "../Domain/Ids.js"
import type { DispatcherIntake } from "./Handoff.js"
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

/**
 * For each event, the body a filtered webhook takes of it: null for the whole event (as every
 * unfiltered webhook), undefined for none of it. Kinds are worked out only for events some
 * filtered webhook may take, once per event; bodies once per event and filter.
 */
const selector = (event: EventRecord) => {
  let kinds: ReadonlyArray<ReadonlyArray<string>> | undefined
  let bodies: Map<string, string | null | undefined> | undefined
  return (filter: string | null): string | null | undefined => {
    const parts = event.filterable
    if (filter === null || parts === undefined) return null
    bodies ??= new Map()
    if (bodies.has(filter)) return bodies.get(filter)
    kinds ??= parts.changes.map((change) => kindsOf(change.field, change.value))
    const taken = selectChanges(filterOf(filter), kinds)
    const body = taken === "all" ? null : taken === "none" ? undefined : parts.bodyOf(taken)
    bodies.set(filter, body)
    return body
  }
}

/**
 * The body a webhook with this stored filter takes of the event: null for the whole event, undefined
 * for none of it (a hub event goes only to webhooks naming its kind). A replay and a poll select
 * stored events with it as the ingress selects new ones.
 */
export const bodyFor = (event: EventRecord, filter: string | null): string | null | undefined =>
  event.onlyToNamed !== undefined && !namesKind(filter, event.onlyToNamed) ? undefined : selector(event)(filter)

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
const handedOff = (row: NewDeliveryRow, webhook: QueueingWebhook, event: EventRecord): LeasedDelivery => ({
  id: row.id,
  webhook_id: webhook.id,
  organization_id: webhook.organization_id,
  message_id: row.message_id,
  status: "pending",
  attempts: 0,
  final_attempt: null,
  next_attempt_at: row.next_attempt_at,
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

/**
 * A new delivery row of `event` to `webhook`: written leased to the dispatcher if its intake admits
 * it (then added to `handedOver`), else queued.
 */
const deliveryRow = (
  webhook: QueueingWebhook,
  event: EventRecord,
  body: string | null,
  now: string,
  handOff: {
    readonly intake: DispatcherIntake | undefined
    readonly lease: HandOffLease | undefined
    readonly handedOver: Array<LeasedDelivery>
  },
  id = newId("dlv")
): NewDeliveryRow => {
  const lease = handOff.intake !== undefined && handOff.intake.admit(webhook.id, webhook.organization_id)
    ? handOff.lease
    : undefined
  const row: NewDeliveryRow = {
    id,
    webhook_id: webhook.id,
    event_id: event.id,
    message_id: newId("msg"),
    status: "pending",
    attempts: 0,
    // A pending row is due from its creation (the list of pending rows relies on it).
    next_attempt_at: now,
    lease_owner: lease?.owner ?? null,
    lease_expires_at: lease?.leaseUntil ?? null,
    created_at: now,
    updated_at: now,
    body
  }
  if (lease !== undefined) handOff.handedOver.push(handedOff(row, webhook, event))
  return row
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
      handedOver: Array<LeasedDelivery>
    ): Effect.Effect<ReadonlyMap<string, number>> =>
      Effect.gen(function*() {
        if (events.length === 0) return new Map<string, number>()
        const handOff = { intake, lease: leaseOf(intake), handedOver }
        const webhooks = yield* outbox.queueingWebhooks([...new Set(events.map((e) => e.instanceId))])
        const rows = events.flatMap((event) => {
          const bodyFor = selector(event)
          return webhooks.flatMap((webhook) => {
            if (webhook.instance_id !== event.instanceId) return []
            if (event.onlyToNamed !== undefined && !namesKind(webhook.events, event.onlyToNamed)) return []
            const body = bodyFor(webhook.events)
            // An event with no change the webhook takes makes no delivery for it.
            return body === undefined ? [] : [deliveryRow(webhook, event, body, now, handOff)]
          })
        })
        yield* outbox.insertDeliveries(rows)
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
          deliveryRow(webhook, event, null, now, { intake, lease: leaseOf(intake), handedOver }, deliveryId)
        ])
        return true
      })
  })),
  dependencies: [OutboxRepo.Default]
}) {}

/**
 * The write of one group of upstream payloads, inside the ingress's transaction (Ingress.ts gathers
 * the group and answers it): each change routed to its instances, the new changes kept (by key),
 * one event per instance and payload, the changes applied to message records, what no instance takes
 * kept aside, and the deliveries queued (Delivery/Enqueue.ts). Each payload's answer, in order.
 */
import { Effect } from "effect"
import type { Enqueue } from "../Delivery/Enqueue.js"
import type { DispatcherIntake } from "../Delivery/Handoff.js"
import type { OutboxRepo } from "../Delivery/Outbox.js"
import type { EventRecord, LeasedDelivery, PersonPart, RouteRow } from "../Delivery/Records.js"
import { newId, nowIso } from "../Domain/Ids.js"
import type { CommittedEvent } from "../LiveEvents/LiveEvents.js"
import type { MessagesRepo } from "../Messages/Repo.js"
import { splitByContact } from "./Contacts.js"
import { dedupeKey, type Envelope, envelopeFor, isReplayBefore, type UpstreamChange } from "./Envelope.js"
import { recordChangesOrNone } from "./RecordChanges.js"

interface Routed {
  readonly route: RouteRow
  readonly change: UpstreamChange
  readonly key: string
  /** The event of this instance for this payload (used only if one of its changes is new). */
  readonly eventId: string
}

/** Each change with the instances it goes to and its dedupe key there; repeats within the payload are dropped. */
const routePayload = (
  changes: ReadonlyArray<UpstreamChange>,
  routeOf: (change: UpstreamChange) => ReadonlyArray<RouteRow>
) => {
  const routed: Array<Routed> = []
  const unrouted: Array<UpstreamChange> = []
  const seen = new Set<string>()
  const eventIds = new Map<string, string>()
  let repeats = 0
  for (const change of changes) {
    const routes = routeOf(change)
    if (routes.length === 0) unrouted.push(change)
    for (const route of routes) {
      const key = dedupeKey(route.id, change)
      const eventId = eventIds.get(route.id) ?? newId("evt")
      eventIds.set(route.id, eventId)
      if (seen.has(key)) repeats++
      else routed.push({ route, change, key, eventId })
      seen.add(key)
    }
  }
  return { routed, unrouted, repeats }
}

/**
 * One event per instance: the envelope of its new changes, in the order received, and those changes
 * for webhooks that take only some kinds (the envelope of a subset is built only if one does).
 */
const eventsOf = (object: string, accepted: ReadonlyArray<Routed>, traceparent: string | undefined) => {
  const byEvent = new Map<
    string,
    { readonly instanceId: string; readonly changes: Array<Routed>; readonly upstream: Array<UpstreamChange> }
  >()
  for (const r of accepted) {
    const event = byEvent.get(r.eventId) ?? { instanceId: r.route.id, changes: [], upstream: [] }
    event.changes.push(r)
    event.upstream.push(r.change)
    byEvent.set(r.eventId, event)
  }
  return [...byEvent].map(([id, event]): EventRecord & { readonly changes: ReadonlyArray<Routed> } => ({
    id,
    instanceId: event.instanceId,
    body: envelopeFor(object, event.upstream),
    changeCount: event.changes.length,
    changes: event.changes,
    traceparent,
    filterable: {
      changes: event.upstream,
      bodyOf: (indices) => envelopeFor(object, indices.flatMap((i) => event.upstream[i] ?? [])),
      byPerson: (indices) =>
        personParts(object, indices === undefined ? event.upstream : indices.flatMap((i) => event.upstream[i] ?? []))
    }
  }))
}

/** Changes by the person they concern (Contacts.ts), each part with its own envelope unless it is the only one. */
const personParts = (object: string, changes: ReadonlyArray<UpstreamChange>): ReadonlyArray<PersonPart> => {
  const parts = splitByContact(changes)
  return parts.length === 1
    ? [{ person: parts[0]?.person ?? null, body: undefined }]
    : parts.map((part) => ({ person: part.person, body: envelopeFor(object, part.changes) }))
}

/** What a group's write needs: the stores it writes to, and the dedupe horizon. */
export interface GroupStores {
  readonly outbox: OutboxRepo
  readonly messages: MessagesRepo
  readonly enqueue: Enqueue
  readonly retentionMs: number
}

/** The routes of every change of the group, and the webhooks of the instances routed to, in one query. */
const routesFor = (outbox: OutboxRepo, changes: ReadonlyArray<UpstreamChange>) =>
  Effect.gen(function*() {
    const phoneNumberIds = [
      ...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined ? [] : [c.phoneNumberId])))
    ]
    const wabaIds = [
      ...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined && c.entryId !== undefined ? [c.entryId] : [])))
    ]
    const { routes, webhooks } = yield* outbox.routes(phoneNumberIds, wabaIds)
    const routeOf = (change: UpstreamChange): ReadonlyArray<RouteRow> =>
      change.phoneNumberId !== undefined
        ? routes.filter((r) => r.phone_number_id === change.phoneNumberId)
        : routes.filter((r) => r.waba_id === change.entryId)
    return { routeOf, webhooks }
  })

/** A change no instance takes (or a stale replay's), as the unrouted store keeps it. */
const keptAside = (change: UpstreamChange, reason?: "stale") => ({
  phoneNumberId: change.phoneNumberId ?? null,
  wabaId: change.entryId ?? null,
  field: change.field ?? null,
  changeJson: JSON.stringify(change.change),
  ...(reason === undefined ? {} : { reason })
})

/**
 * Writes a group of payloads (inside the WriteBatcher's transaction); returns each one's answer,
 * in order. Deliveries the dispatcher admits are written leased to it and added to `handedOver`.
 */
export const writeGroup = (
  stores: GroupStores,
  group: ReadonlyArray<{ readonly envelope: Envelope; readonly traceparent: string | undefined }>,
  intake: DispatcherIntake | undefined,
  handedOver: Array<LeasedDelivery>,
  committed: Array<CommittedEvent>
) =>
  Effect.gen(function*() {
    const { outbox, messages, enqueue, retentionMs } = stores
    const now = nowIso()
    // A replay older than the dedupe horizon would be taken for new: it is kept aside instead.
    const horizon = Date.now() - retentionMs
    const replays = group.map((q) => isReplayBefore(q.envelope.changes, horizon))
    const fresh = group.filter((_, i) => replays[i] !== true)
    const { routeOf, webhooks } = yield* routesFor(outbox, fresh.flatMap((q) => q.envelope.changes))
    const plans = group.map((q, i) => routePayload(replays[i] === true ? [] : q.envelope.changes, routeOf))
    const routed = plans.flatMap((p) => p.routed)
    // A key new to the store is kept for the first event naming it, even across payloads of the group.
    const firstNamed = routed.length === 0
      ? new Map<string, string>()
      : yield* outbox.acceptChanges(routed.map((r) => ({ dedupeKey: r.key, eventId: r.eventId })), now)
    const eventsPerPayload = plans.map((p, i) =>
      eventsOf(
        group[i]?.envelope.object ?? "",
        p.routed.filter((r) => firstNamed.get(r.key) === r.eventId),
        group[i]?.traceparent
      )
    )
    const events = eventsPerPayload.flat()
    committed.push(...events)
    yield* outbox.insertUnrouted(
      [
        ...plans.flatMap((p) => p.unrouted).map((c) => keptAside(c)),
        ...group.flatMap((q, i) => (replays[i] === true ? q.envelope.changes.map((c) => keptAside(c, "stale")) : []))
      ],
      now
    )
    const unapplied: Array<string> = []
    yield* messages.applyChanges(events.flatMap((e) =>
      e.changes.flatMap((r) =>
        recordChangesOrNone(
          { instanceId: r.route.id, organizationId: r.route.organization_id },
          r.change,
          now,
          (error) => {
            unapplied.push(`${r.eventId}: ${String(error)}`)
          }
        )
      )
    ))
    if (unapplied.length > 0) {
      yield* Effect.logWarning(
        "Upstream changes were stored and delivered as received, but not applied to message records"
      ).pipe(
        Effect.annotateLogs({ changes: unapplied.join("; ") })
      )
    }
    // The events' rows are written with their deliveries (one statement on PostgreSQL).
    const queued = yield* enqueue.events(events, now, intake, handedOver, { webhooks, writeEvents: true })
    return plans.map((p, i) => {
      const payloadEvents = eventsPerPayload[i] ?? []
      const accepted = payloadEvents.reduce((n, e) => n + e.changeCount, 0)
      return {
        changes: group[i]?.envelope.changes.length ?? 0,
        accepted,
        duplicates: p.routed.length - accepted + p.repeats,
        unrouted: p.unrouted.length,
        deliveries: payloadEvents.reduce((n, e) => n + (queued.get(e.id) ?? 0), 0),
        stale: replays[i] === true ? group[i]?.envelope.changes.length ?? 0 : 0,
        unroutedNumbers: [...new Set(p.unrouted.map((c) => c.phoneNumberId ?? `waba ${c.entryId ?? "?"}`))],
        events: payloadEvents
      }
    })
  })

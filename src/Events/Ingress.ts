/**
 * Accepts one upstream webhook payload: routes every change of every entry to its instance (by
 * `value.metadata.phone_number_id`, or by business account for account-level changes), and in ONE
 * transaction stores the new changes (a redelivered change is recognised by its key and skipped),
 * applies them to message records, stores each instance's envelope and queues one delivery per
 * active webhook. Changes for unknown numbers are kept aside for the operator. The dispatcher is
 * signalled only after the commit.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Either, Layer } from "effect"
import { BadRequest } from "../Domain/Errors.js"
import { newId, nowIso } from "../Domain/Ids.js"
import { MessagesRepo } from "../Messages/Repo.js"
import type { Json } from "../Upstream/Upstream.js"
import { DispatchSignal } from "./DispatchSignal.js"
import { dedupeKey, envelopeFor, parseEnvelope, type UpstreamChange } from "./Envelope.js"
import { messageEffects } from "./MessageEffects.js"
import { type EventRecord, OutboxRepo, type RouteRow } from "./Outbox.js"

export interface IngestResult {
  /** Changes in the payload, over all entries. */
  readonly changes: number
  /** Changes stored for an instance for the first time (a change for two instances counts twice). */
  readonly accepted: number
  readonly duplicates: number
  readonly unrouted: number
  readonly deliveries: number
}

export class Ingress extends Context.Tag("Ingress")<Ingress, {
  readonly ingest: (payload: Json) => Effect.Effect<IngestResult, BadRequest>
}>() {}

interface Routed {
  readonly route: RouteRow
  readonly change: UpstreamChange
  readonly key: string
  /** The event of this instance for this payload (used only if one of its changes is new). */
  readonly eventId: string
}

/** Each change with the instances it goes to and its dedupe key there; repeats within the payload are dropped. */
const plan = (changes: ReadonlyArray<UpstreamChange>, routeOf: (change: UpstreamChange) => ReadonlyArray<RouteRow>) => {
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

/** One event per instance: the envelope of its new changes, in the order received. */
const eventsOf = (object: string, accepted: ReadonlyArray<Routed>) => {
  const byEvent = new Map<string, { readonly instanceId: string; readonly changes: Array<Routed> }>()
  for (const r of accepted) {
    const event = byEvent.get(r.eventId) ?? { instanceId: r.route.id, changes: [] }
    event.changes.push(r)
    byEvent.set(r.eventId, event)
  }
  return [...byEvent].map(([id, event]): EventRecord & { readonly changes: ReadonlyArray<Routed> } => ({
    id,
    instanceId: event.instanceId,
    body: envelopeFor(object, event.changes.map((r) => r.change)),
    changeCount: event.changes.length,
    changes: event.changes
  }))
}

export const IngressLive = Layer.effect(
  Ingress,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const outbox = yield* OutboxRepo
    const messages = yield* MessagesRepo
    const signal = yield* DispatchSignal

    const routesFor = (changes: ReadonlyArray<UpstreamChange>) =>
      Effect.gen(function*() {
        const phoneNumberIds = [...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined ? [] : [c.phoneNumberId])))]
        const wabaIds = [...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined && c.entryId !== undefined ? [c.entryId] : [])))]
        const rows = yield* outbox.routes(phoneNumberIds, wabaIds)
        return (change: UpstreamChange): ReadonlyArray<RouteRow> =>
          change.phoneNumberId !== undefined
            ? rows.filter((r) => r.phone_number_id === change.phoneNumberId)
            : rows.filter((r) => r.waba_id === change.entryId)
      })

    return Ingress.of({
      ingest: (payload) =>
        Effect.gen(function*() {
          const envelope = yield* Either.match(parseEnvelope(payload), {
            onLeft: (details) =>
              Effect.fail(
                new BadRequest({
                  message: `Invalid webhook payload: ${details.map((d) => `${d.field}: ${d.message}`).join("; ")}`,
                  error: "validation_failed",
                  details
                })
              ),
            onRight: Effect.succeed
          })
          const { repeats, routed, unrouted } = plan(envelope.changes, yield* routesFor(envelope.changes))
          const now = nowIso()

          const { accepted, deliveries } = yield* Effect.gen(function*() {
            const fresh = routed.length === 0
              ? new Set<string>()
              : yield* outbox.acceptChanges(routed.map((r) => ({ dedupeKey: r.key, eventId: r.eventId })), now)
            const events = eventsOf(envelope.object, routed.filter((r) => fresh.has(r.key)))
            yield* outbox.insertEvents(events, now)
            yield* outbox.insertUnrouted(
              unrouted.map((c) => ({
                phoneNumberId: c.phoneNumberId ?? null,
                wabaId: c.entryId ?? null,
                field: c.field ?? null,
                changeJson: JSON.stringify(c.change)
              })),
              now
            )
            for (const r of events.flatMap((e) => e.changes)) {
              const effects = messageEffects({ instanceId: r.route.id, organizationId: r.route.organization_id }, r.change, now)
              yield* Effect.forEach(effects.statuses, messages.applyStatus, { discard: true })
              yield* Effect.forEach(effects.inbound, messages.recordInbound, { discard: true })
            }
            const deliveries = yield* outbox.enqueue(events, now)
            return { accepted: fresh.size, deliveries }
          }).pipe(sql.withTransaction, Effect.orDie)

          if (deliveries > 0) yield* signal.notify
          if (unrouted.length > 0) {
            const numbers = [...new Set(unrouted.map((c) => c.phoneNumberId ?? `waba ${c.entryId ?? "?"}`))]
            yield* Effect.logWarning("Upstream changes for unknown numbers were kept aside (unrouted_events)").pipe(
              Effect.annotateLogs({ count: unrouted.length, numbers: numbers.join(", ") })
            )
          }
          return {
            changes: envelope.changes.length,
            accepted,
            duplicates: routed.length - accepted + repeats,
            unrouted: unrouted.length,
            deliveries
          }
        })
    })
  })
)

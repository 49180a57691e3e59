/**
 * Accepts upstream webhook payloads: routes every change of every entry to its instance (by
 * `value.metadata.phone_number_id`, or by business account for account-level changes), and stores
 * the new changes (a redelivered change is recognised by its key and skipped), applies them to
 * message records, stores each instance's envelope and queues one delivery per active webhook
 * taking any of its changes (see Domain/EventKinds.ts).
 * Changes for unknown numbers are kept aside for the operator.
 *
 * Group commit: payloads arriving together are written together, in one gathering transaction of
 * the WriteBatcher (one group at a time, taking what waits as the transaction begins); each caller
 * is answered only after that COMMIT. Only then are the deliveries the dispatcher admitted handed to
 * it (Handoff.ts), and it is signalled for the rest. Payloads are applied in the order they arrived.
 * Callers wait on a plain callback rather than a Deferred and a Queue, and the fast lane submits
 * without a fiber of its own: this is on every upstream post's path.
 */
import { Context, Duration, Effect, Either, Exit, FiberId, FiberSet, Layer } from "effect"
import { HubConfig } from "../Config.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Enqueue } from "../Delivery/Enqueue.js"
import { type DispatcherIntake, Handoff } from "../Delivery/Handoff.js"
import { OutboxRepo } from "../Delivery/Outbox.js"
import type { EventRecord, LeasedDelivery, RouteRow } from "../Delivery/Records.js"
import { BadRequest, ServiceUnavailable } from "../Domain/Errors.js"
import { newId, nowIso } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"
import { type CommittedEvent, LiveEvents } from "../LiveEvents/LiveEvents.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Metrics } from "../Metrics/Metrics.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import { MAX_UPSTREAM_BODY } from "./Api.js"
import {
  dedupeKey,
  type Envelope,
  envelopeFor,
  isReplayBefore,
  parseEnvelope,
  type UpstreamChange
} from "./Envelope.js"
import { recordChangesOrNone } from "./RecordChanges.js"

export interface IngestResult {
  /** Changes in the payload, over all entries. */
  readonly changes: number
  /** Changes stored for an instance for the first time (a change for two instances counts twice). */
  readonly accepted: number
  readonly duplicates: number
  readonly unrouted: number
  readonly deliveries: number
  /** Changes of a replay (every change older than HUB_RETENTION), kept aside and not delivered. */
  readonly stale: number
}

/** What a submitted payload is answered: its summary, and the numbers of its changes no instance is bound to. */
export interface IngestAnswer extends IngestResult {
  readonly unroutedNumbers: ReadonlyArray<string>
}

/** The summary the upstream is answered (the unrouted numbers go to the log only). */
export const summaryOf = (answer: IngestAnswer): IngestResult => ({
  changes: answer.changes,
  accepted: answer.accepted,
  duplicates: answer.duplicates,
  unrouted: answer.unrouted,
  deliveries: answer.deliveries,
  stale: answer.stale
})

export class Ingress extends Context.Tag("Ingress")<Ingress, {
  /** Checks a payload, stores it and answers once it is committed. */
  readonly ingest: (payload: Json) => Effect.Effect<IngestResult, BadRequest>
  /**
   * Checks the envelope's shape: the envelope, or the 400 that names every part that is wrong.
   * With `submit`, what `ingest` does, for a caller without a fiber (the fast lane).
   */
  readonly check: (payload: Json) => Either.Either<Envelope, BadRequest>
  /** Queues a checked envelope for the next group; `done` is called once that group has committed (or failed). */
  readonly submit: (envelope: Envelope, done: (outcome: Exit.Exit<IngestAnswer>) => void) => void
  /**
   * The 503 to answer an upstream post with while HUB_INGRESS_MAX_PENDING posts already wait for
   * their commit; undefined when there is room. Checked by the public endpoint before `submit`, in
   * the same turn, so the bound holds; the sandbox's own events are not bounded.
   */
  readonly overloaded: () => ServiceUnavailable | undefined
  /** The warning an answer with unrouted changes is logged with (in the request's log context). */
  readonly warnUnrouted: (answer: IngestAnswer) => Effect.Effect<void>
  /**
   * Holds room for an upstream post's body until its signature is checked (HUB_INGRESS_UNVERIFIED_MB
   * over all posts): the release, to call once it is checked or given up, or the 503 to answer at
   * once, before a byte of the body is read. A post of no declared length is held at the largest a post may be.
   */
  readonly holdUnverified: (declaredBytes: number | undefined) => (() => void) | ServiceUnavailable
}>() {}

/** Most payloads written in one transaction. */
const MAX_GROUP = 256

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

/**
 * One event per instance: the envelope of its new changes, in the order received, and those changes
 * for webhooks that take only some kinds (the envelope of a subset is built only if one does).
 */
const eventsOf = (object: string, accepted: ReadonlyArray<Routed>) => {
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
    filterable: {
      changes: event.upstream,
      bodyOf: (indices) => envelopeFor(object, indices.flatMap((i) => event.upstream[i] ?? []))
    }
  }))
}

/** A validated payload waiting for its group's commit. */
interface Queued {
  readonly envelope: Envelope
  readonly done: (outcome: Exit.Exit<IngestAnswer>) => void
}

/** What a group's write needs: the stores it writes to, and the dedupe horizon. */
interface GroupStores {
  readonly outbox: OutboxRepo
  readonly messages: MessagesRepo["Type"]
  readonly enqueue: Enqueue
  readonly retentionMs: number
}

/** The routes of every change of the group, in one query. */
const routesFor = (outbox: OutboxRepo, changes: ReadonlyArray<UpstreamChange>) =>
  Effect.gen(function*() {
    const phoneNumberIds = [
      ...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined ? [] : [c.phoneNumberId])))
    ]
    const wabaIds = [
      ...new Set(changes.flatMap((c) => (c.phoneNumberId === undefined && c.entryId !== undefined ? [c.entryId] : [])))
    ]
    const rows = yield* outbox.routes(phoneNumberIds, wabaIds)
    return (change: UpstreamChange): ReadonlyArray<RouteRow> =>
      change.phoneNumberId !== undefined
        ? rows.filter((r) => r.phone_number_id === change.phoneNumberId)
        : rows.filter((r) => r.waba_id === change.entryId)
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
const writeGroup = (
  stores: GroupStores,
  group: ReadonlyArray<Queued>,
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
    const routeOf = yield* routesFor(outbox, fresh.flatMap((q) => q.envelope.changes))
    const plans = group.map((q, i) => plan(replays[i] === true ? [] : q.envelope.changes, routeOf))
    const routed = plans.flatMap((p) => p.routed)
    // A key new to the store is kept for the first event naming it, even across payloads of the group.
    const firstNamed = routed.length === 0
      ? new Map<string, string>()
      : yield* outbox.acceptChanges(routed.map((r) => ({ dedupeKey: r.key, eventId: r.eventId })), now)
    const eventsPerPayload = plans.map((p, i) =>
      eventsOf(group[i]?.envelope.object ?? "", p.routed.filter((r) => firstNamed.get(r.key) === r.eventId))
    )
    const events = eventsPerPayload.flat()
    committed.push(...events)
    yield* outbox.insertEvents(events, now)
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
    const queued = yield* enqueue.events(events, now, intake, handedOver)
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
        unroutedNumbers: [...new Set(p.unrouted.map((c) => c.phoneNumberId ?? `waba ${c.entryId ?? "?"}`))]
      }
    })
  })

/** The envelope of a payload, or the 400 that names every part that is wrong. */
const check = (payload: Json): Either.Either<Envelope, BadRequest> =>
  Either.mapLeft(parseEnvelope(payload), (details) =>
    new BadRequest({
      message: `Invalid webhook payload: ${details.map((d) => `${d.field}: ${d.message}`).join("; ")}`,
      error: "validation_failed",
      details
    }))

/**
 * Bytes held by posts whose signature is not checked yet: anyone may open such a post, so without a
 * bound a few held connections of 8 MiB each pin the hub's memory (five: +41 MB, measured).
 */
const makeUnverifiedBudget = (maxBytes: number) => {
  let unverifiedBytes = 0
  return (declaredBytes: number | undefined) => {
    const bytes = Math.min(declaredBytes ?? MAX_UPSTREAM_BODY, MAX_UPSTREAM_BODY)
    if (unverifiedBytes + bytes > maxBytes) {
      return new ServiceUnavailable({
        message: "The hub holds as many unverified upstream posts as it may (HUB_INGRESS_UNVERIFIED_MB); retry shortly",
        error: "overloaded",
        retryAfterSeconds: 1
      })
    }
    unverifiedBytes += bytes
    let released = false
    return () => {
      if (released) return
      released = true
      unverifiedBytes -= bytes
    }
  }
}

/** The warning an answer with unrouted changes is logged with. */
const warnUnrouted = (answer: IngestAnswer) =>
  answer.unrouted === 0 ?
    Effect.void :
    Effect.logWarning("Upstream changes for unknown numbers were kept aside (unrouted_events)").pipe(
      Effect.annotateLogs({ count: answer.unrouted, numbers: answer.unroutedNumbers.join(", ") })
    )

export const IngressLive = Layer.scoped(
  Ingress,
  Effect.gen(function*() {
    const stores: GroupStores = {
      outbox: yield* OutboxRepo,
      messages: yield* MessagesRepo,
      enqueue: yield* Enqueue,
      retentionMs: Duration.toMillis((yield* HubConfig).retention)
    }
    const signal = yield* DispatchSignal
    const handoff = yield* Handoff
    const batcher = yield* WriteBatcher
    const { ingressMaxPending, ingressUnverifiedMaxBytes } = yield* HubConfig
    const metrics = yield* Metrics
    const runFork = yield* FiberSet.makeRuntime<never>()
    // The hub's streams; alone (its own tests) the ingress is given LiveEvents.None.
    const live = yield* LiveEvents

    // One closure on purpose: the payloads waiting, the group being written and the stop share their
    // state; what needs none of it (the group's write, the checks, the budget) is at module scope.
    /** Payloads waiting for the next group, in arrival order. */
    let waiting: Array<Queued> = []
    /** Payloads of the group being written (waiting for its commit, like `waiting`). */
    let inGroup = 0
    /** Whether a group is queued or being written: one at a time, so payloads are applied in arrival order. */
    let writing = false
    let closed = false

    /**
     * The next group gathers (WriteBatcher.gather): it takes the payloads waiting when its transaction
     * begins, so under load it carries what arrived meanwhile; an idle hub writes at once.
     */
    const writeNext = () => {
      if (writing || waiting.length === 0 || closed) return
      writing = true
      const handedOver: Array<LeasedDelivery> = []
      const committed: Array<CommittedEvent> = []
      let intake: DispatcherIntake | undefined
      let group: ReadonlyArray<Queued> | undefined
      /** The group: taken as its transaction begins, or, if that failed to begin, the payloads it would have taken. */
      const take = () => {
        if (group === undefined) {
          group = waiting.splice(0, MAX_GROUP)
          inGroup = group.length
        }
        return group
      }
      const written = batcher.gather(Effect.suspend(() => {
        intake = handoff.intake()
        return writeGroup(stores, take(), intake, handedOver, committed)
      }))
      const answered = written.pipe(
        Effect.orDie,
        Effect.exit,
        Effect.flatMap((exit) =>
          Exit.match(exit, {
            onFailure: (cause) =>
              Effect.sync(() => {
                intake?.releaseUncommitted(handedOver)
                for (const q of take()) q.done(Exit.failCause(cause))
              }),
            onSuccess: (answers) =>
              Effect.gen(function*() {
                metrics.ingested(answers)
                if (intake !== undefined && handedOver.length > 0) yield* intake.startCommitted(handedOver)
                live.publish(committed)
                // Queued rows wait for a dispatcher round.
                if (answers.reduce((n, a) => n + a.deliveries, 0) > handedOver.length) yield* signal.notify
                take().forEach((q, i) => {
                  const answer = answers[i]
                  q.done(answer === undefined ? Exit.die("no answer for a payload") : Exit.succeed(answer))
                })
              })
          })
        )
      )
      runFork(answered).addObserver((exit) => {
        writing = false
        inGroup = 0
        // Interrupted (the hub is stopping) before the group was answered: it is answered so.
        if (Exit.isFailure(exit)) { for (const q of take()) q.done(Exit.failCause(exit.cause)) }
        writeNext()
      })
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        const left = waiting
        waiting = []
        for (const q of left) q.done(Exit.interrupt(FiberId.none))
      })
    )

    const submit = (envelope: Envelope, done: (outcome: Exit.Exit<IngestAnswer>) => void) => {
      if (closed) return done(Exit.interrupt(FiberId.none))
      // A caller answered twice (its group failed, then was interrupted) hears only the first.
      let answered = false
      waiting.push({
        envelope,
        done: (outcome) => {
          if (answered) return
          answered = true
          done(outcome)
        }
      })
      writeNext()
    }

    const overloaded = () =>
      waiting.length + inGroup < ingressMaxPending ? undefined : new ServiceUnavailable({
        message: `The hub is overloaded: ${
          waiting.length + inGroup
        } upstream posts are waiting for their commit; retry shortly`,
        error: "overloaded",
        retryAfterSeconds: 1
      })

    const ingestEnvelope = (envelope: Envelope) =>
      Effect.async<IngestAnswer>((resume) => submit(envelope, resume)).pipe(
        Effect.tap(warnUnrouted),
        Effect.map(summaryOf)
      )

    return Ingress.of({
      check,
      submit,
      overloaded,
      warnUnrouted,
      holdUnverified: makeUnverifiedBudget(ingressUnverifiedMaxBytes),
      ingest: (payload) => Effect.flatMap(check(payload), ingestEnvelope)
    })
  })
)

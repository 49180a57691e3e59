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
import { Duration, Effect, Either, Exit, type Fiber, FiberId, FiberSet } from "effect"
import { HubConfig } from "../Config.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { Enqueue } from "../Delivery/Enqueue.js"
import { type DispatcherIntake, Handoff } from "../Delivery/Handoff.js"
import { OutboxRepo } from "../Delivery/Outbox.js"
import type { EventRecord, LeasedDelivery } from "../Delivery/Records.js"
import { BadRequest, ServiceUnavailable } from "../Domain/Errors.js"
import type { Json } from "../Domain/Json.js"
import { type CommittedEvent, LiveEvents } from "../LiveEvents/LiveEvents.js"
import { MessagesRepo } from "../Messages/Repo.js"
import { Metrics } from "../Metrics/Metrics.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import { MAX_UPSTREAM_BODY } from "./Api.js"
import { type Envelope, parseEnvelope } from "./Envelope.js"
import { type GroupStores, writeGroup } from "./GroupWrite.js"

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
  /** The events it stored (their ids and instances name them in its trace). */
  readonly events: ReadonlyArray<EventRecord>
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

/** What the upstream endpoints (and the sandbox) ask of the ingress. */
interface IngressShape {
  /** Checks a payload, stores it and answers once it is committed. */
  readonly ingest: (payload: Json) => Effect.Effect<IngestResult, BadRequest>
  /**
   * Checks the envelope's shape: the envelope, or the 400 that names every part that is wrong.
   * With `submit`, what `ingest` does, for a caller without a fiber (the fast lane).
   */
  readonly check: (payload: Json) => Either.Either<Envelope, BadRequest>
  /**
   * Queues a checked envelope for the next group; `done` is called once that group has committed (or
   * failed). Its events keep `traceparent`, the span their deliveries are traced under (when tracing).
   */
  readonly submit: (envelope: Envelope, done: (outcome: Exit.Exit<IngestAnswer>) => void, traceparent?: string) => void
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
}

/** Most payloads written in one transaction. */
const MAX_GROUP = 256

/** A validated payload waiting for its group's commit. */
interface Queued {
  readonly envelope: Envelope
  readonly traceparent: string | undefined
  readonly done: (outcome: Exit.Exit<IngestAnswer>) => void
}

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

/**
 * The posts waiting for their commit, shared by `submit`, the group's write and the stop; and what
 * the groups are written and answered with.
 */
interface GroupQueue {
  readonly stores: GroupStores
  readonly signal: DispatchSignal
  readonly handoff: Handoff
  readonly batcher: WriteBatcher["Type"]
  readonly metrics: Metrics["Type"]
  readonly live: LiveEvents["Type"]
  /** Runs a group's write and answers in the layer's FiberSet (interrupted when it closes). */
  readonly runFork: (effect: Effect.Effect<void>) => Fiber.RuntimeFiber<void>
  readonly maxPending: number
  /** Payloads waiting for the next group, in arrival order. */
  waiting: Array<Queued>
  /** Payloads of the group being written (waiting for its commit, like `waiting`). */
  inGroup: number
  /** Whether a group is queued or being written: one at a time, so payloads are applied in arrival order. */
  writing: boolean
  closed: boolean
}

/** One group's write: what it handed to the dispatcher, what it committed, and the payloads it took. */
interface GroupRun {
  readonly handedOver: Array<LeasedDelivery>
  readonly committed: Array<CommittedEvent>
  intake: DispatcherIntake | undefined
  group: ReadonlyArray<Queued> | undefined
}

/** The group: taken as its transaction begins, or, if that failed to begin, the payloads it would have taken. */
const takeGroup = (queue: GroupQueue, run: GroupRun) => {
  if (run.group === undefined) {
    run.group = queue.waiting.splice(0, MAX_GROUP)
    queue.inGroup = run.group.length
  }
  return run.group
}

/**
 * The next group gathers (WriteBatcher.gather): it takes the payloads waiting when its transaction
 * begins, so under load it carries what arrived meanwhile; an idle hub writes at once.
 */
const writeNext = (queue: GroupQueue) => {
  if (queue.writing || queue.waiting.length === 0 || queue.closed) return
  queue.writing = true
  const run: GroupRun = { handedOver: [], committed: [], intake: undefined, group: undefined }
  const written = queue.batcher.gather(Effect.suspend(() => {
    run.intake = queue.handoff.intake()
    return writeGroup(queue.stores, takeGroup(queue, run), run.intake, run.handedOver, run.committed)
  }))
  const answered = written.pipe(
    Effect.orDie,
    Effect.exit,
    Effect.flatMap((exit) => answerGroup(queue, run, exit))
  )
  queue.runFork(answered).addObserver((exit) => {
    queue.writing = false
    queue.inGroup = 0
    // Interrupted (the hub is stopping) before the group was answered: it is answered so.
    if (Exit.isFailure(exit)) { for (const q of takeGroup(queue, run)) q.done(Exit.failCause(exit.cause)) }
    writeNext(queue)
  })
}

/**
 * After the group's transaction: once committed, the dispatcher starts what it admitted (and is told
 * of the rest), the live streams hear, and each payload is answered; if it failed, every payload hears so.
 */
const answerGroup = (queue: GroupQueue, run: GroupRun, exit: Exit.Exit<ReadonlyArray<IngestAnswer>>) =>
  Exit.match(exit, {
    onFailure: (cause) =>
      Effect.sync(() => {
        run.intake?.releaseUncommitted(run.handedOver)
        for (const q of takeGroup(queue, run)) q.done(Exit.failCause(cause))
      }),
    onSuccess: (answers) =>
      Effect.gen(function*() {
        queue.metrics.ingested(answers)
        if (run.intake !== undefined && run.handedOver.length > 0) yield* run.intake.startCommitted(run.handedOver)
        queue.live.publish(run.committed)
        // Queued rows wait for a dispatcher round.
        if (answers.reduce((n, a) => n + a.deliveries, 0) > run.handedOver.length) queue.signal.notify()
        takeGroup(queue, run).forEach((q, i) => {
          const answer = answers[i]
          q.done(answer === undefined ? Exit.die("no answer for a payload") : Exit.succeed(answer))
        })
      })
  })

/** Queues a checked envelope for the next group (Ingress's `submit`). */
const submit = (
  queue: GroupQueue,
  envelope: Envelope,
  done: (outcome: Exit.Exit<IngestAnswer>) => void,
  traceparent?: string
) => {
  if (queue.closed) return done(Exit.interrupt(FiberId.none))
  // A caller answered twice (its group failed, then was interrupted) hears only the first.
  let answered = false
  queue.waiting.push({
    envelope,
    traceparent,
    done: (outcome) => {
      if (answered) return
      answered = true
      done(outcome)
    }
  })
  writeNext(queue)
}

/** The 503 while HUB_INGRESS_MAX_PENDING posts wait for their commit (Ingress's `overloaded`). */
const overloaded = (queue: GroupQueue) =>
  queue.waiting.length + queue.inGroup < queue.maxPending ? undefined : new ServiceUnavailable({
    message: `The hub is overloaded: ${
      queue.waiting.length + queue.inGroup
    } upstream posts are waiting for their commit; retry shortly`,
    error: "overloaded",
    retryAfterSeconds: 1
  })

/** The stop: no more payloads are taken, and those waiting are answered interrupted. */
const closeQueue = (queue: GroupQueue) =>
  Effect.sync(() => {
    queue.closed = true
    const left = queue.waiting
    queue.waiting = []
    for (const q of left) q.done(Exit.interrupt(FiberId.none))
  })

export class Ingress extends Effect.Service<Ingress>()("Ingress", {
  scoped: Effect.gen(function*() {
    const config = yield* HubConfig
    const queue: GroupQueue = {
      stores: {
        outbox: yield* OutboxRepo,
        messages: yield* MessagesRepo,
        enqueue: yield* Enqueue,
        retentionMs: Duration.toMillis(config.retention)
      },
      signal: yield* DispatchSignal,
      handoff: yield* Handoff,
      batcher: yield* WriteBatcher,
      metrics: yield* Metrics,
      // The hub's streams; alone (its own tests) the ingress is given LiveEvents.None.
      live: yield* LiveEvents,
      runFork: yield* FiberSet.makeRuntime<never>(),
      maxPending: config.ingressMaxPending,
      waiting: [],
      inGroup: 0,
      writing: false,
      closed: false
    }
    yield* Effect.addFinalizer(() => closeQueue(queue))
    const ingestEnvelope = (envelope: Envelope) =>
      Effect.async<IngestAnswer>((resume) => submit(queue, envelope, resume)).pipe(
        Effect.tap(warnUnrouted),
        Effect.map(summaryOf)
      )
    const service: IngressShape = {
      check,
      submit: (envelope, done, traceparent) => submit(queue, envelope, done, traceparent),
      overloaded: () => overloaded(queue),
      warnUnrouted,
      holdUnverified: makeUnverifiedBudget(config.ingressUnverifiedMaxBytes),
      ingest: (payload) => Effect.flatMap(check(payload), ingestEnvelope)
    }
    return service
  })
}) {}

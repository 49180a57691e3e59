/**
 * Live events: every upstream change the ingress commits, fanned out to the open streams of the
 * organization it was routed to (GET /api/events/stream), and to the long polls waiting for an event
 * of its instance (nextEvent). Nothing is stored: a stream sees what commits while it is open.
 *
 * Each stream has its own bounded buffer. A client that reads too slowly loses the events that do
 * not fit and is told how many with a `dropped` notice, so one slow client neither holds memory nor
 * slows the ingress or other streams. (Effect's PubSub shares one buffer among its subscribers:
 * its dropping strategy would drop for every stream when one is behind, and its sliding strategy
 * drops without telling the client.)
 */
import { Chunk, Context, Deferred, Effect, Exit, Layer, Queue, type Scope, Stream, SubscriptionRef } from "effect"
import { TooManyRequests } from "../Domain/Errors.js"
import { nowIso, type OrganizationId } from "../Domain/Ids.js"

/** What the ingress committed for one instance from one upstream post (its events table row). */
export interface CommittedEvent {
  readonly id: string
  readonly instanceId: string
  /** The envelope, as JSON text: what the instance's webhooks receive. */
  readonly body: string
  /** The routed changes it holds; each route names the instance's organization. */
  readonly changes: ReadonlyArray<{ readonly route: { readonly organization_id: string } }>
}

/** Who a stream is for: an organization's instances, or one of them, through one credential. */
export interface Audience {
  readonly organizationId: OrganizationId
  /** One instance only (an instance token, or an organization token naming one); all when undefined. */
  readonly instanceId: string | undefined
  /** The token or session the stream was opened with: its streams are counted against HUB_STREAMS_PER_TOKEN. */
  readonly credentialId: string
}

/** How many streams may be open at once, per credential and per organization. */
export interface StreamLimits {
  readonly perToken: number
  readonly perOrganization: number
}

/** One item of a stream: an event as it committed, or how many events this stream lost. */
export type LiveFrame =
  | {
    readonly _tag: "Event"
    readonly id: string
    readonly instanceId: string
    readonly receivedAt: string
    readonly body: string
  }
  | { readonly _tag: "Dropped"; readonly count: number }

type EventFrame = Extract<LiveFrame, { readonly _tag: "Event" }>

export class LiveEvents extends Context.Tag("LiveEvents")<LiveEvents, {
  /** Hands committed events to the open streams; returns at once (cheap when no stream is open). */
  readonly publish: (events: ReadonlyArray<CommittedEvent>) => void
  /**
   * The audience's frames from now on, until the scope closes (subscribed when this succeeds), or a
   * 429 when its credential or organization has as many streams open as `limits` allow.
   */
  readonly subscribe: (
    audience: Audience,
    limits?: StreamLimits
  ) => Effect.Effect<Stream.Stream<LiveFrame>, TooManyRequests, Scope.Scope>
  /** The organization's streams open now. */
  readonly openStreams: (organizationId: string) => number
  /** How many streams are open (all organizations): the count now, then each change (tests wait on it). */
  readonly streamsOpen: Stream.Stream<number>
  /** The 429 a new stream of the audience would be refused with now; undefined when there is room. */
  readonly refusal: (audience: Audience, limits: StreamLimits) => TooManyRequests | undefined
  /**
   * A wake-up at the instance's next committed event, armed now (so an event committed before it is
   * awaited still counts): the effect it answers completes then. A long poll's (Poll/Poll.ts); it is
   * no stream, so it counts against no stream limit.
   */
  readonly nextEvent: (instanceId: string) => Effect.Effect<Effect.Effect<void>, never, Scope.Scope>
  /** How many wake-ups are armed (all instances): the count now, then each change (tests wait on it). */
  readonly armed: Stream.Stream<number>
}>() {
  /** No live streams: what is published goes nowhere, a stream never hears anything (the ingress alone, in its tests). */
  static readonly None = Layer.succeed(this, {
    publish: () => {},
    subscribe: () => Effect.succeed(Stream.never),
    openStreams: () => 0,
    streamsOpen: Stream.make(0),
    refusal: () => undefined,
    nextEvent: () => Effect.succeed(Effect.never),
    armed: Stream.make(0)
  })
}

interface Subscriber {
  readonly instanceId: string | undefined
  readonly queue: Queue.Queue<EventFrame>
  /** Events lost since the client last read: counted here, told after what it had buffered. */
  dropped: number
}

/** Events buffered per stream before it drops (envelopes are a few KB each). */
const STREAM_BUFFER = 256

/** The open streams by organization: a set for each organization with any open. */
type StreamsByOrganization = Map<string, Set<Subscriber>>

/** Each event, as one frame, to its organization's streams that watch its instance; a full buffer counts a drop. */
const fanOut = (byOrganization: StreamsByOrganization, events: ReadonlyArray<CommittedEvent>) => {
  const receivedAt = nowIso()
  for (const event of events) {
    const organizationId = event.changes[0]?.route.organization_id
    const subscribers = organizationId === undefined ? undefined : byOrganization.get(organizationId)
    if (subscribers === undefined) continue
    let frame: EventFrame | undefined
    for (const subscriber of subscribers) {
      if (subscriber.instanceId !== undefined && subscriber.instanceId !== event.instanceId) continue
      frame ??= { _tag: "Event", id: event.id, instanceId: event.instanceId, receivedAt, body: event.body }
      if (!Queue.unsafeOffer(subscriber.queue, frame)) subscriber.dropped++
    }
  }
}

/** Everything buffered, then the notice of what did not fit (drops happen only once the buffer is full). */
const takeFrames = (subscriber: Subscriber, buffer: number): Effect.Effect<Chunk.Chunk<LiveFrame>> =>
  Effect.map(Queue.takeBetween(subscriber.queue, 1, buffer), (frames): Chunk.Chunk<LiveFrame> => {
    const dropped = subscriber.dropped
    subscriber.dropped = 0
    return dropped === 0 ? frames : Chunk.append(frames, { _tag: "Dropped", count: dropped })
  })

const tooManyStreams = (message: string) =>
  new TooManyRequests({ message, error: "too_many_streams", retryAfterSeconds: 5 })

/** The 429 for a new stream when its credential or organization has as many open as `limits` allow. */
const limitRefusal = (
  credentialStreams: number,
  organizationStreams: number,
  limits: StreamLimits
): TooManyRequests | undefined => {
  if (credentialStreams >= limits.perToken) {
    return tooManyStreams(
      `This token has ${limits.perToken} event streams open, as many as it may (HUB_STREAMS_PER_TOKEN); close one first`
    )
  }
  if (organizationStreams >= limits.perOrganization) {
    return tooManyStreams(
      `The organization has ${limits.perOrganization} event streams open, as many as it may (HUB_STREAMS_PER_ORGANIZATION); close one first`
    )
  }
  return undefined
}

export const liveEventsLayer = (buffer: number = STREAM_BUFFER) =>
  Layer.effect(
    LiveEvents,
    Effect.map(Effect.zip(SubscriptionRef.make(0), SubscriptionRef.make(0)), ([streamsOpen, armed]) => {
      const byOrganization: StreamsByOrganization = new Map()
      const perCredential = new Map<string, number>()
      let open = 0

      const add = (organizationId: string, subscriber: Subscriber) => {
        const subscribers = byOrganization.get(organizationId) ?? new Set<Subscriber>()
        subscribers.add(subscriber)
        byOrganization.set(organizationId, subscribers)
        open++
      }

      const remove = (organizationId: string, subscriber: Subscriber) => {
        const subscribers = byOrganization.get(organizationId)
        if (subscribers?.delete(subscriber) !== true) return
        open--
        if (subscribers.size === 0) byOrganization.delete(organizationId)
      }

      const countCredential = (credentialId: string, by: number) => {
        const n = (perCredential.get(credentialId) ?? 0) + by
        if (n > 0) perCredential.set(credentialId, n)
        else perCredential.delete(credentialId)
      }

      /** The 429 for a stream past its limits; undefined when there is room (checked and taken in one step). */
      const refusal = (audience: Audience, limits: StreamLimits | undefined): TooManyRequests | undefined =>
        limits === undefined ? undefined : limitRefusal(
          perCredential.get(audience.credentialId) ?? 0,
          byOrganization.get(audience.organizationId)?.size ?? 0,
          limits
        )

      const subscribe = (audience: Audience, limits?: StreamLimits) =>
        Effect.map(
          Effect.acquireRelease(
            Effect.flatMap(Queue.dropping<EventFrame>(buffer), (queue) =>
              Effect.suspend(() => {
                // Checked and counted in one synchronous step, so concurrent openings cannot both pass.
                const refused = refusal(audience, limits)
                if (refused !== undefined) return Effect.fail(refused)
                const subscriber: Subscriber = { instanceId: audience.instanceId, queue, dropped: 0 }
                add(audience.organizationId, subscriber)
                countCredential(audience.credentialId, 1)
                return Effect.as(SubscriptionRef.update(streamsOpen, (n) => n + 1), subscriber)
              })),
            (subscriber) =>
              Effect.zipRight(
                Effect.sync(() => {
                  remove(audience.organizationId, subscriber)
                  countCredential(audience.credentialId, -1)
                }),
                Effect.zipRight(SubscriptionRef.update(streamsOpen, (n) => n - 1), Queue.shutdown(subscriber.queue))
              )
          ),
          (subscriber) => Stream.repeatEffectChunk(takeFrames(subscriber, buffer))
        )

      /** Armed wake-ups by instance id. */
      const wakeUps = new Map<string, Set<Deferred.Deferred<void>>>()
      const nextEvent = (instanceId: string) =>
        Effect.map(
          Effect.acquireRelease(
            Effect.flatMap(Deferred.make<void>(), (woken) =>
              Effect.as(
                Effect.zipRight(
                  Effect.sync(() => wakeUps.set(instanceId, (wakeUps.get(instanceId) ?? new Set()).add(woken))),
                  SubscriptionRef.update(armed, (n) => n + 1)
                ),
                woken
              )),
            (woken) =>
              Effect.zipRight(
                Effect.sync(() => {
                  const armedHere = wakeUps.get(instanceId)
                  armedHere?.delete(woken)
                  if (armedHere?.size === 0) wakeUps.delete(instanceId)
                }),
                SubscriptionRef.update(armed, (n) => n - 1)
              )
          ),
          (woken) => Deferred.await(woken)
        )

      return LiveEvents.of({
        publish: (events) => {
          if (open > 0) fanOut(byOrganization, events)
          if (wakeUps.size === 0) return
          for (const event of events) {
            for (const woken of wakeUps.get(event.instanceId) ?? []) Deferred.unsafeDone(woken, Exit.void)
          }
        },
        nextEvent,
        armed: armed.changes,
        subscribe,
        refusal,
        openStreams: (organizationId) => byOrganization.get(organizationId)?.size ?? 0,
        streamsOpen: streamsOpen.changes
      })
    })
  )

export const LiveEventsLive = liveEventsLayer()

/**
 * The outbox's records as the ingress, the lease and the dispatcher see them: accepted changes and
 * events, what a leased delivery carries, and what became of its attempts. (The delivery log's rows
 * are Webhooks/DeliveryLog.ts's.)
 */
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"

export interface AcceptedChange {
  readonly dedupeKey: string
  readonly eventId: string
}

export interface EventRecord {
  readonly id: string
  readonly instanceId: string
  /** The exact JSON text every webhook of the instance receives. */
  readonly body: string
  readonly changeCount: number
  /** Its changes, for webhooks that take only some kinds; without them every webhook takes the whole event. */
  readonly filterable?: FilterableEvent | undefined
  /** A hub event only webhooks naming this kind receive (not those that take every kind): the queue's outcomes. */
  readonly onlyToNamed?: string | undefined
  /** The W3C traceparent its deliveries are traced under: the upstream post's commit, when tracing was on. */
  readonly traceparent?: string | undefined
}

/** An event's changes as a webhook's event filter sees them (see Domain/EventKinds.ts). */
interface FilterableEvent {
  /** Each change's field and value, in the order of the body. */
  readonly changes: ReadonlyArray<{ readonly field: string | undefined; readonly value: JsonObject }>
  /** The body holding only the changes at these indices (ascending), each unaltered. */
  readonly bodyOf: (indices: ReadonlyArray<number>) => string
  /**
   * The changes at these indices (all when undefined) by the person they concern, for webhooks that
   * keep each person's order; a part's body is undefined when it is the only part (the body the
   * webhook takes anyway). Without it, the event concerns no person.
   */
  readonly byPerson?: (indices: ReadonlyArray<number> | undefined) => ReadonlyArray<PersonPart>
}

/** One person's part of an event (person null: the changes that concern no one). */
export interface PersonPart {
  readonly person: string | null
  readonly body: string | undefined
}

export interface UnroutedChange {
  readonly phoneNumberId: string | null
  readonly wabaId: string | null
  readonly field: string | null
  readonly changeJson: string
  /** Why it is kept aside: undefined for a number no instance is bound to, `stale` for a replay older than the dedupe horizon. */
  readonly reason?: "stale"
}

/** A delivery leased by a dispatcher, with what it needs to send it. */
export interface LeasedDelivery {
  readonly id: string
  readonly webhook_id: string
  readonly event_id: string
  /** The event's traceparent (EventRecord.traceparent), or null. */
  readonly traceparent: string | null
  /** The webhook's organization: its attempts in flight count against the organization's share too. */
  readonly organization_id: string
  /** The person whose lane it is first in (Lanes.ts); null when it waits in none. */
  readonly contact_key: string | null
  readonly message_id: string
  readonly status: string
  readonly attempts: number
  readonly final_attempt: number | null
  readonly next_attempt_at: string
  /** When its lease ends: its attempt must start early enough to end before (StartGate.ts). */
  readonly lease_expires_at: string
  readonly body: string
  readonly url: string
  /**
   * 0/1 as leased (an INTEGER on both engines), true when handed off in memory: read with Boolean().
   * Not decoded on the lease, the dispatcher's hot path (speed).
   */
  readonly webhook_active: 0 | 1 | boolean
  /** As read at lease time: a success clears it. */
  readonly webhook_failing_since: string | null
  readonly secret_encrypted: string
  readonly previous_secret_encrypted: string | null
  readonly previous_secret_expires_at: string | null
  /** The webhook's custom headers: every name, the secret ones with a null value (JSON; see Webhooks/CustomHeaders.ts). */
  readonly headers: string | null
  /** The secret ones, encrypted. */
  readonly headers_encrypted: string | null
}

/** What became of one attempt, decided by the dispatcher. */
export type AttemptResult =
  | { readonly _tag: "Succeeded" }
  | { readonly _tag: "RetryAt"; readonly at: string }
  | { readonly _tag: "Dead" }

export interface AttemptRecord {
  readonly delivery: LeasedDelivery
  readonly attempt: number
  readonly startedAt: string
  readonly finishedAt: string
  readonly latencyMs: number
  readonly statusCode: number | null
  readonly error: string | null
  readonly responseSnippet: string | null
  readonly result: AttemptResult
}

/** An active webhook new deliveries are queued for, with what it takes to send one at once. */
export interface QueueingWebhook {
  readonly id: string
  readonly organization_id: string
  readonly instance_id: string
  readonly url: string
  readonly failing_since: string | null
  readonly secret_encrypted: string
  readonly previous_secret_encrypted: string | null
  readonly previous_secret_expires_at: string | null
  /** Its event filter: NULL for every kind (see Domain/EventKinds.ts). */
  readonly events: string | null
  readonly headers: string | null
  readonly headers_encrypted: string | null
  /** `per_contact`: each person's deliveries one at a time, in order (Lanes.ts); else `none`. */
  readonly ordering: string
}

/**
 * A new delivery row as written: pending, due from its creation (or held behind its person's lane,
 * with no due time), leased to a dispatcher if handed off to it.
 */
export interface NewDeliveryRow {
  readonly id: string
  readonly webhook_id: string
  readonly event_id: string
  readonly message_id: string
  readonly status: "pending"
  readonly attempts: 0
  readonly next_attempt_at: string | null
  readonly lease_owner: string | null
  readonly lease_expires_at: string | null
  readonly created_at: string
  readonly updated_at: string
  /** Its own body, for a filtered webhook that takes only some of the event's changes; null for the event's. */
  readonly body: string | null
  /** Its person's lane and place in it (Lanes.ts); null for a webhook without per-person order. */
  readonly contact_key: string | null
  readonly contact_seq: number | null
}

/** An instance an upstream change can be routed to. */
export interface RouteRow {
  readonly id: InstanceId
  readonly organization_id: OrganizationId
  readonly phone_number_id: string
  readonly waba_id: string
}

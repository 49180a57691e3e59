/**
 * What the upstream's `calls` changes say about calls: `value.calls[]` (event `connect` or
 * `terminate`, with the call's direction) and `value.statuses[]` of type `call` (RINGING, ACCEPTED,
 * REJECTED, … of calls the business placed). An incoming call rings from its `connect` until it is
 * accepted, rejected or terminated.
 */
import type { InstanceId } from "../Domain/Ids.js"
import type { Json, JsonObject } from "../Domain/Json.js"
import { isJsonObject } from "../Domain/Json.js"
import { isoFromUnix } from "../Domain/UpstreamTime.js"

const callStates = ["ringing", "connected", "accepted", "rejected", "ended"] as const
export type CallState = (typeof callStates)[number]

/** The order states move in: a late or repeated event never moves a call back. */
export const callStateRank: Record<CallState, number> = { ringing: 0, connected: 1, accepted: 1, rejected: 2, ended: 2 }

type CallDirection = "USER_INITIATED" | "BUSINESS_INITIATED"

export interface CallEvent {
  readonly instanceId: InstanceId
  readonly callId: string
  /** The WhatsApp user on the call: the caller of an incoming call, the callee of an outgoing one. */
  readonly userNumber: string | undefined
  /** Their business-scoped user id, when given (a username user's call may name no number). */
  readonly userId: string | undefined
  readonly direction: CallDirection | undefined
  readonly state: CallState
  /** When the upstream says it happened (ISO 8601). */
  readonly at: string
}

/** A call event for the records, beside the message changes of the same transaction (see Messages/Repo.ts). */
export interface CallChange {
  readonly _tag: "Call"
  readonly event: CallEvent
}

const items = (value: JsonObject, key: string): ReadonlyArray<JsonObject> => {
  const list = value[key]
  return Array.isArray(list) ? list.filter(isJsonObject) : []
}

const text = (value: Json | undefined): string | undefined =>
  typeof value === "string" && value !== "" ? value : typeof value === "number" ? String(value) : undefined

/**
 * A `connect` names its direction; older payloads without it are told apart by their SDP: an
 * incoming call brings the user's offer, an outgoing one the user's answer.
 */
const directionOf = (call: JsonObject): CallDirection => {
  if (call.direction === "BUSINESS_INITIATED" || call.direction === "USER_INITIATED") return call.direction
  const session = call.session
  return isJsonObject(session) && session.sdp_type === "answer" ? "BUSINESS_INITIATED" : "USER_INITIATED"
}

const stateOfStatus = (status: string): CallState =>
  status === "RINGING" ? "ringing" : status === "ACCEPTED" ? "accepted" : status === "REJECTED" ? "rejected" : "ended"

/** The call events of a `calls` change routed to an instance, in the order listed (calls, then statuses). */
export const callEvents = (instanceId: InstanceId, value: JsonObject, receivedAt: string): ReadonlyArray<CallEvent> => {
  const fromCalls = items(value, "calls").flatMap((call): ReadonlyArray<CallEvent> => {
    const callId = text(call.id)
    const event = call.event
    if (callId === undefined || (event !== "connect" && event !== "terminate")) return []
    const direction = directionOf(call)
    return [{
      instanceId,
      callId,
      userNumber: text(direction === "USER_INITIATED" ? call.from : call.to),
      userId: text(direction === "USER_INITIATED" ? call.from_user_id : call.to_user_id),
      direction,
      state: event === "terminate" ? "ended" : direction === "USER_INITIATED" ? "ringing" : "connected",
      at: isoFromUnix(call.timestamp, receivedAt)
    }]
  })
  // Call statuses are only sent for calls the business placed.
  const fromStatuses = items(value, "statuses").flatMap((status): ReadonlyArray<CallEvent> => {
    const callId = text(status.id)
    const state = text(status.status)
    if (callId === undefined || state === undefined || (status.type !== undefined && status.type !== "call")) return []
    return [{
      instanceId,
      callId,
      userNumber: text(status.recipient_id),
      userId: text(status.recipient_user_id),
      direction: "BUSINESS_INITIATED",
      state: stateOfStatus(state.toUpperCase()),
      at: isoFromUnix(status.timestamp, receivedAt)
    }]
  })
  return [...fromCalls, ...fromStatuses]
}

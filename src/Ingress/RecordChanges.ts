/**
 * What upstream changes do to message records: `statuses[]` move outbound messages forward
 * (the repository keeps moves forward-only), `messages[]` become inbound records; `calls` changes
 * record calls (Calls/CallEvents.ts).
 */
import { type CallChange, callEvents } from "../Calls/CallEvents.js"
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { MessageChange } from "../Messages/ChangePlan.js"
import type { InboundMessage, StatusUpdate } from "../Messages/Repo.js"
import type { Json, JsonObject } from "../Upstream/Upstream.js"
import type { UpstreamChange } from "./Envelope.js"
import { isJsonObject } from "../Domain/Json.js"
import { isoFromUnix } from "../Domain/UpstreamTime.js"

/** `played` (a voice message listened to) is as far as `read`. */
const STATES: ReadonlySet<string> = new Set(["sent", "delivered", "read", "played", "failed"])


/** A non-empty string field, as the upstream writes ids. */
const text = (value: Json | undefined): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

const items = (value: JsonObject, key: string): ReadonlyArray<JsonObject> => {
  const list = value[key]
  return Array.isArray(list) ? list.filter(isJsonObject) : []
}


/** The status moves and inbound messages carried by an instance's new change (its statuses first, as listed), or its call events. */
export const recordChangesOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  change: UpstreamChange,
  receivedAt: string
): ReadonlyArray<MessageChange | CallChange> => {
  if (change.field === "calls") return callEvents(target.instanceId, change.value, receivedAt).map((event) => ({ _tag: "Call", event }))
  if (change.field !== undefined && change.field !== "messages") return []
  const statuses = items(change.value, "statuses").flatMap((s): ReadonlyArray<StatusUpdate> => {
    const id = s.id
    const status = s.status
    if (typeof id !== "string" || typeof status !== "string" || !STATES.has(status)) return []
    const errors = s.errors
    return [{
      instanceId: target.instanceId,
      waMessageId: id,
      status: status === "played" ? "read" : status === "sent" || status === "delivered" || status === "read" ? status : "failed",
      at: isoFromUnix(s.timestamp, receivedAt),
      ...(Array.isArray(errors) && errors[0] !== undefined ? { error: errors[0] } : {})
    }]
  })
  const contacts = items(change.value, "contacts")
  const inbound = items(change.value, "messages").flatMap((m): ReadonlyArray<InboundMessage> => {
    const from = text(m.from)
    const userId = text(m.from_user_id)
    // A username user's message carries no number, only their business-scoped user id (since 2026).
    const sender = from ?? userId
    if (typeof m.id !== "string" || sender === undefined) return []
    const contact = contacts.find((c) => (userId !== undefined && c.user_id === userId) || (from !== undefined && c.wa_id === from))
    const profile = contact?.profile
    return [{
      instanceId: target.instanceId,
      organizationId: target.organizationId,
      waMessageId: m.id,
      from: sender,
      userId: userId ?? text(contact?.user_id),
      parentUserId: text(m.from_parent_user_id) ?? text(contact?.parent_user_id),
      username: isJsonObject(profile) ? text(profile.username) : undefined,
      type: typeof m.type === "string" ? m.type : "unknown",
      at: isoFromUnix(m.timestamp, receivedAt)
    }]
  })
  return [
    ...statuses.map((update): MessageChange => ({ _tag: "Status", update })),
    ...inbound.map((message): MessageChange => ({ _tag: "Inbound", message }))
  ]
}

/**
 * recordChangesOf, or none when the change cannot be applied to the records (a shape nothing
 * expected): the change is still stored and delivered as received, and one bad change never fails
 * the group of posts it is written with.
 */
export const recordChangesOrNone = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  change: UpstreamChange,
  receivedAt: string,
  onFailure: (error: unknown) => void
): ReadonlyArray<MessageChange | CallChange> => {
  try {
    return recordChangesOf(target, change, receivedAt)
  } catch (error) {
    onFailure(error)
    return []
  }
}

/**
 * What upstream changes do to message records: `statuses[]` move outbound messages forward
 * (the repository keeps moves forward-only), `messages[]` become inbound records, echoes of what the
 * business sent elsewhere and the history synchronised at onboarding become records marked with
 * their origin; `calls` changes record calls (Calls/CallEvents.ts); every change's pairs of
 * identifiers are learned (Messages/Identities.ts).
 */
import { type CallChange, callEvents } from "../Calls/CallEvents.js"
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { Json, JsonObject } from "../Domain/Json.js"
import { isJsonObject } from "../Domain/Json.js"
import { isoFromUnix } from "../Domain/UpstreamTime.js"
import type { MessageChange } from "../Messages/ChangePlan.js"
import { type IdentityChange, identityLinksOf } from "../Messages/Identities.js"
import { optOutsOf } from "../Messages/OptOuts.js"
import { type ReceivedMessage, type StatusUpdate } from "../Messages/Records.js"
import type { RecordChange } from "../Messages/Repo.js"
import { throughputUpgradeOf } from "../PhoneNumbers/ThroughputRepo.js"
import { type TemplateCategoryChange, templateCategoryOf } from "../Templates/Categories.js"
import type { UpstreamChange } from "./Envelope.js"

/** `played` (a voice message listened to) is as far as `read`. */
const STATES: ReadonlySet<string> = new Set(["sent", "delivered", "read", "played", "failed"])

/** A non-empty string field, as the upstream writes ids. */
const text = (
  value: Json | undefined
): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

const items = (value: JsonObject, key: string): ReadonlyArray<JsonObject> => {
  const list = value[key]
  return Array.isArray(list) ? list.filter(isJsonObject) : []
}

/**
 * What an instance's new change does to the records: the pairs of identifiers it names (any field),
 * the template category it settles, then its status moves and messages (its statuses first, as
 * listed) or its call events.
 */
const recordChangesOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  change: UpstreamChange,
  receivedAt: string
): ReadonlyArray<RecordChange> => {
  const category = templateCategoryOf(change.entryId, change.field, change.value, receivedAt)
  const upgrade = throughputUpgradeOf(change.entryId, change.field, change.value.event)
  return [
    ...(upgrade === undefined ? [] : [upgrade]),
    ...optOutsOf(change.entryId, change.field, change.value, receivedAt),
    ...identityLinksOf(target.organizationId, change.value).map((link): IdentityChange => ({ _tag: "Identity", link })),
    ...(category === undefined ? [] : [{ _tag: "TemplateCategory", category } satisfies TemplateCategoryChange]),
    ...messageOrCallChangesOf(target, change, receivedAt)
  ]
}

const messageOrCallChangesOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  change: UpstreamChange,
  receivedAt: string
): ReadonlyArray<MessageChange | CallChange> => {
  switch (change.field) {
    case "calls":
      return callEvents(target.instanceId, change.value, receivedAt).map((event) => ({ _tag: "Call", event }))
    case undefined:
    case "messages":
      return messagesValueChanges(target, change.value, receivedAt, undefined)
    // While Meta's Business Agent holds a conversation, its messages come in the same shape, one level down.
    case "standby":
      return isJsonObject(change.value.standby)
        ? messagesValueChanges(target, change.value.standby, receivedAt, "standby")
        : []
    case "smb_message_echoes":
    case "message_echoes":
      return echoesOf(target, change.value, receivedAt, change.field).map((message) => ({ _tag: "Received", message }))
    case "history":
      return historyOf(target, change.value, receivedAt).map((message) => ({ _tag: "Received", message }))
    default:
      return []
  }
}

/** A `messages` value (or a `standby` one): its statuses, inbound messages and echoes, in that order. */
const messagesValueChanges = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  value: JsonObject,
  receivedAt: string,
  origin: string | undefined
): ReadonlyArray<MessageChange> => {
  const statuses = items(value, "statuses").flatMap((s): ReadonlyArray<StatusUpdate> => {
    const id = s.id
    const status = s.status
    if (typeof id !== "string" || typeof status !== "string" || !STATES.has(status)) return []
    const errors = s.errors
    const recipients = [text(s.recipient_id), text(s.recipient_user_id)].filter((r) => r !== undefined)
    return [{
      instanceId: target.instanceId,
      waMessageId: id,
      status: stateOf(status),
      at: isoFromUnix(s.timestamp, receivedAt),
      recipients,
      ...(Array.isArray(errors) && errors[0] !== undefined ? { error: errors[0] } : {})
    }]
  })
  const contacts = items(value, "contacts")
  const inbound = items(value, "messages").flatMap((m): ReadonlyArray<ReceivedMessage> => {
    // A username user's message carries no number, only their business-scoped user id (since 2026).
    const party = { number: text(m.from), userId: text(m.from_user_id), parentUserId: text(m.from_parent_user_id) }
    return recordOf(target, contacts, m, party, receivedAt, origin)
  })
  return [
    ...statuses.map((update): MessageChange => ({ _tag: "Status", update })),
    ...inbound.map((message): MessageChange => ({ _tag: "Received", message })),
    ...(origin === undefined
      ? []
      : echoesOf(target, value, receivedAt, origin).map((message): MessageChange => ({ _tag: "Received", message })))
  ]
}

/**
 * The record of a message with one user, named by their number, business-scoped user id or both; the
 * change's contacts fill in the ids and username the message leaves out. Without an id or a party, none.
 */
const recordOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  contacts: ReadonlyArray<JsonObject>,
  message: JsonObject,
  party: {
    readonly number: string | undefined
    readonly userId: string | undefined
    readonly parentUserId: string | undefined
  },
  receivedAt: string,
  origin: string | undefined,
  direction?: "outbound"
): ReadonlyArray<ReceivedMessage> => {
  const { number, userId } = party
  const named = number ?? userId
  if (typeof message.id !== "string" || named === undefined) return []
  const contact = contacts.find((c) =>
    (userId !== undefined && c.user_id === userId) || (number !== undefined && c.wa_id === number)
  )
  const profile = contact?.profile
  return [{
    instanceId: target.instanceId,
    organizationId: target.organizationId,
    waMessageId: message.id,
    ...(direction === undefined ? {} : { direction }),
    party: named,
    userId: userId ?? text(contact?.user_id),
    parentUserId: party.parentUserId ?? text(contact?.parent_user_id),
    username: isJsonObject(profile) ? text(profile.username) : undefined,
    type: typeof message.type === "string" ? message.type : "unknown",
    at: isoFromUnix(message.timestamp, receivedAt),
    origin
  }]
}

const stateOf = (status: string): StatusUpdate["status"] =>
  status === "played" ? "read" : status === "sent" || status === "delivered" || status === "read" ? status : "failed"

/**
 * Messages the business sent elsewhere (the WhatsApp Business app, a linked device, Meta's agent):
 * `message_echoes[]`, flat (`to`, `to_user_id`, `type`) or with the sent message nested (`message`).
 * Recorded as outbound, sent, marked with their origin.
 */
const echoesOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  value: JsonObject,
  receivedAt: string,
  origin: string
): ReadonlyArray<ReceivedMessage> => {
  const contacts = items(value, "contacts")
  return items(value, "message_echoes").flatMap((echo): ReadonlyArray<ReceivedMessage> => {
    const sent = isJsonObject(echo.message) ? { ...echo.message, ...echo } : echo
    const party = {
      number: text(sent.to),
      userId: text(sent.to_user_id) ?? text(sent.recipient),
      parentUserId: text(sent.to_parent_user_id)
    }
    return recordOf(target, contacts, sent, party, receivedAt, origin, "outbound")
  })
}

/**
 * The chat history synchronised at onboarding: `history[].threads[]`, each the conversation with one
 * user (its `id`), whose messages are the business's (`from` its own number) or the user's. A
 * business message keeps the status the history gives it.
 */
const historyOf = (
  target: { readonly instanceId: InstanceId; readonly organizationId: OrganizationId },
  value: JsonObject,
  receivedAt: string
): ReadonlyArray<ReceivedMessage> => {
  const metadata = value.metadata
  const business = isJsonObject(metadata) ? text(metadata.display_phone_number) : undefined
  return items(value, "history").flatMap((chunk) =>
    items(chunk, "threads").flatMap((thread) => {
      const user = text(thread.id)
      return items(thread, "messages").flatMap((m): ReadonlyArray<ReceivedMessage> => {
        const from = text(m.from)
        const outbound = from !== undefined && from === business
        const party = outbound ? text(m.to) ?? user : from ?? text(m.from_user_id) ?? user
        if (typeof m.id !== "string" || party === undefined) return []
        const context = m.history_context
        const status = isJsonObject(context) ? text(context.status)?.toLowerCase() : undefined
        return [{
          instanceId: target.instanceId,
          organizationId: target.organizationId,
          waMessageId: m.id,
          direction: outbound ? "outbound" : "inbound",
          party,
          userId: text(outbound ? m.to_user_id : m.from_user_id),
          type: typeof m.type === "string" ? m.type : "unknown",
          at: isoFromUnix(m.timestamp, receivedAt),
          origin: "history",
          ...(outbound && status !== undefined && STATES.has(status) ? { status: stateOf(status) } : {})
        }]
      })
    })
  )
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
): ReadonlyArray<RecordChange> => {
  try {
    return recordChangesOf(target, change, receivedAt)
  } catch (error) {
    onFailure(error)
    return []
  }
}

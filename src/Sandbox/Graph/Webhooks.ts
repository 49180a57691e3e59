/**
 * Webhook payloads in the upstream's shapes (research §4): status events for sandbox sends and
 * inbound messages of every type the spec lists, for `POST /sandbox/inbound` and tests.
 */
import type { Json, JsonObject } from "../../Domain/Json.js"
import type { InboundMessageType } from "../../Domain/Vocabulary.js"
import { displayDigits, hex, numericId, sha256Hex, wamid } from "./Ids.js"

export interface SandboxNumber {
  readonly phoneNumberId: string
  readonly wabaId: string
}

const envelope = (number: SandboxNumber, value: JsonObject): JsonObject => ({
  object: "whatsapp_business_account",
  entry: [{ id: number.wabaId, changes: [{ field: "messages", value }] }]
})

const metadata = (number: SandboxNumber) => ({
  display_phone_number: displayDigits(number.phoneNumberId),
  phone_number_id: number.phoneNumberId
})

const seconds = (millis: number) => String(Math.floor(millis / 1000))

export type StatusName = "sent" | "delivered" | "read" | "failed"

export interface StatusEvent {
  readonly messageId: string
  /** The recipient's number, or their business-scoped user id when the send named no number. */
  readonly recipient: { readonly waId: string } | { readonly userId: string }
  readonly status: StatusName
  readonly at: number
  /** Pricing category: the template's category for template sends, `service` otherwise. */
  readonly category: string
  readonly conversationId: string
  /** For `failed`: the upstream error objects. */
  readonly errors?: ReadonlyArray<JsonObject>
}

/** A status change as the upstream posts it: `statuses[]` with conversation and pricing unless failed. */
export const statusPayload = (number: SandboxNumber, event: StatusEvent): JsonObject => {
  // A send to a business-scoped user id is reported by it (recipient_user_id), without recipient_id, as Meta does.
  const recipient = "waId" in event.recipient
    ? { recipient_id: event.recipient.waId }
    : { recipient_user_id: event.recipient.userId }
  const base = { id: event.messageId, status: event.status, timestamp: seconds(event.at), ...recipient }
  const status: JsonObject = event.status === "failed"
    ? { ...base, errors: event.errors ?? [] }
    : {
      ...base,
      conversation: {
        id: event.conversationId,
        expiration_timestamp: seconds(event.at + 24 * 3600 * 1000),
        origin: { type: event.category }
      },
      pricing: {
        billable: event.category !== "service",
        pricing_model: "PMP",
        category: event.category,
        type: event.category === "service" ? "free_customer_service" : "regular"
      }
    }
  return envelope(number, { messaging_product: "whatsapp", metadata: metadata(number), statuses: [status] })
}

/**
 * Media ids the sandbox minted for inbound messages start with this prefix; the sandbox's getMedia
 * answers for them (with a small placeholder file) although nothing was uploaded.
 */
export const INBOUND_MEDIA_PREFIX = "8880"

const inboundMedia = (mimeType: string) => {
  const id = `${INBOUND_MEDIA_PREFIX}${numericId(12)}`
  return {
    id,
    mime_type: mimeType,
    sha256: Buffer.from(sha256Hex(new TextEncoder().encode(id)), "hex").toString("base64")
  }
}

/** What the customer would plausibly have sent, for each type; a caller's content is laid over it. */
const defaultContent = (type: InboundMessageType, business: string): JsonObject => {
  switch (type) {
    case "text":
      return { body: "Hello from the sandbox" }
    case "image":
      return { ...inboundMedia("image/jpeg"), caption: "A photo" }
    case "document":
      return { ...inboundMedia("application/pdf"), filename: "invoice.pdf" }
    case "audio":
      return { ...inboundMedia("audio/ogg; codecs=opus"), voice: true }
    case "video":
      return inboundMedia("video/mp4")
    case "sticker":
      return { ...inboundMedia("image/webp"), animated: false }
    case "location":
      return { latitude: 52.520008, longitude: 13.404954, name: "Brandenburg Gate", address: "Pariser Platz, Berlin" }
    case "contacts":
      return {
        contacts: [{
          name: { formatted_name: "Sheena Nelson", first_name: "Sheena", last_name: "Nelson" },
          phones: [{ phone: "+1 650-555-1234", wa_id: "16505551234", type: "MOBILE" }]
        }]
      }
    case "interactive":
      return { type: "button_reply", button_reply: { id: "yes-button", title: "Yes" } }
    case "reaction":
      return { message_id: wamid(business), emoji: "\u{1F44D}" }
    case "order":
      return {
        catalog_id: "194836987003835",
        text: "",
        product_items: [{ product_retailer_id: "di9ozbzfi4", quantity: 2, item_price: 30, currency: "USD" }]
      }
  }
}

export interface InboundMessage extends SandboxNumber {
  /** The customer's number (wa_id digits); a username user who hides it has none. */
  readonly from?: string
  /** The customer's business-scoped user id (from_user_id), and their username. */
  readonly userId?: string
  readonly username?: string
  readonly type: InboundMessageType
  /** Fields of the content object named like `type`; missing ones get plausible defaults. */
  readonly content?: JsonObject | ReadonlyArray<Json>
  readonly profileName?: string
  /** The business message this one replies to. */
  readonly contextMessageId?: string
  readonly messageId?: string
  readonly at: number
}

/** An inbound message webhook payload (`field: messages` with `contacts[]` and `messages[]`). */
export const inboundMessagePayload = (message: InboundMessage): JsonObject => {
  const business = displayDigits(message.phoneNumberId)
  const from = message.from?.replace(/^\+/, "")
  const defaults = defaultContent(message.type, business)
  // `contacts` content is the array itself; every other type's content is an object.
  const content: Json = message.type === "contacts"
    ? (Array.isArray(message.content) ? message.content : defaults.contacts ?? [])
    : { ...defaults, ...(message.content !== undefined && !Array.isArray(message.content) ? message.content : {}) }
  const item: JsonObject = {
    ...(message.contextMessageId === undefined ? {} : { context: { from: business, id: message.contextMessageId } }),
    ...(from === undefined ? {} : { from }),
    ...(message.userId === undefined ? {} : { from_user_id: message.userId }),
    id: message.messageId ?? wamid(from ?? message.userId ?? ""),
    timestamp: seconds(message.at),
    type: message.type,
    [message.type]: content
  }
  return envelope(message, {
    messaging_product: "whatsapp",
    metadata: metadata(message),
    contacts: [{
      profile: {
        name: message.profileName ?? "Sandbox Customer",
        ...(message.username === undefined ? {} : { username: message.username })
      },
      ...(from === undefined ? {} : { wa_id: from }),
      ...(message.userId === undefined ? {} : { user_id: message.userId })
    }],
    messages: [item]
  })
}

export const conversationId = () => hex(16)

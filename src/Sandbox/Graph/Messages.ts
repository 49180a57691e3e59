/**
 * Sandbox sends: the checks the upstream makes synchronously (code 100 for a bad body, 131030,
 * 131047, 132001 and the forced failures), the send response, and the status events that follow.
 */
import { Effect } from "effect"
import type { Json, JsonObject } from "../../Domain/Json.js"
import { isJsonObject } from "../../Domain/Json.js"
import { isBusinessScopedUserId } from "../../Domain/UserIds.js"
import { messageTypes } from "../../Domain/Vocabulary.js"
import type { SendMessageResponse, UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import {
  ASYNC_WINDOW_PREFIX,
  checkReserved,
  invalidParameter,
  SYNC_WINDOW_PREFIX,
  templateMissing,
  windowClosed
} from "./Failures.js"
import { stableNumericId, wamid } from "./Ids.js"

const SENDABLE: ReadonlySet<string> = new Set(messageTypes)
const MEDIA_TYPES = ["image", "audio", "video", "document", "sticker"]
const INTERACTIVE_TYPES = [
  "button",
  "list",
  "product",
  "product_list",
  "catalog_message",
  "flow",
  "cta_url",
  "location_request_message",
  "address_message",
  "call_permission_request",
  "order_details",
  "order_status",
  "voice_call"
]

const isText = (j: Json | undefined): j is string => typeof j === "string" && j.trim() !== ""

const required = (name: string) => invalidParameter(`The parameter ${name} is required.`)

/** An accepted send, with what the status events need. */
export interface AcceptedSend {
  readonly response: SendMessageResponse & JsonObject
  readonly messageId: string
  /** Who it went to: their number, or (a send to `recipient`) their business-scoped user id only. */
  readonly recipient: { readonly waId: string } | { readonly userId: string }
  /** `failed` asynchronously with 131047 (window closed), or the usual sent → delivered → read. */
  readonly outcome: "delivered" | "window_closed"
  readonly templateCategory: string | undefined
}

const checkMedia = (type: string, media: JsonObject): UpstreamError | undefined => {
  const hasId = isText(media.id)
  const hasLink = isText(media.link)
  if (hasId === hasLink) return invalidParameter(`Param ${type} must have exactly one of id or link`)
  if (hasLink && !/^https?:\/\//.test(String(media.link))) {
    return invalidParameter(`Param ${type}.link must be an http(s) URL`)
  }
  if ((type === "audio" || type === "sticker") && media.caption !== undefined) {
    return invalidParameter(`Param ${type}.caption is not allowed for ${type}`)
  }
  if (typeof media.caption === "string" && media.caption.length > 1024) {
    return invalidParameter(`Param ${type}.caption must be at most 1024 characters`)
  }
  return undefined
}

const checkInteractive = (interactive: JsonObject): UpstreamError | undefined => {
  const kind = interactive.type
  if (typeof kind !== "string" || !INTERACTIVE_TYPES.includes(kind)) {
    return invalidParameter(`Param interactive.type must be one of {${INTERACTIVE_TYPES.join(", ")}}`)
  }
  const action = isJsonObject(interactive.action) ? interactive.action : undefined
  const body = isJsonObject(interactive.body) ? interactive.body : undefined
  if (action === undefined) return required("interactive.action")
  if ((kind === "product" || kind === "product_list" || kind === "catalog_message") && !isText(body?.text)) {
    return required("interactive.body.text")
  }
  if (kind === "product" && (!isText(action.catalog_id) || !isText(action.product_retailer_id))) {
    return required("interactive.action.catalog_id and interactive.action.product_retailer_id")
  }
  if (kind === "product_list") {
    const header = isJsonObject(interactive.header) ? interactive.header : undefined
    if (header?.type !== "text" || !isText(header.text)) return required("interactive.header (type text)")
    if (!isText(action.catalog_id) || !Array.isArray(action.sections) || action.sections.length === 0) {
      return required("interactive.action.catalog_id and interactive.action.sections")
    }
  }
  if (kind === "catalog_message" && action.name !== "catalog_message") {
    return invalidParameter("Param interactive.action.name must be catalog_message")
  }
  return undefined
}

/** The content checks that do not need state; undefined when the body is acceptable. */
const checkContent = (type: string, content: Json | undefined): UpstreamError | undefined => {
  if (type === "contacts") return Array.isArray(content) && content.length > 0 ? undefined : required("contacts")
  if (!isJsonObject(content)) return required(type)
  if (type === "text") {
    if (!isText(content.body)) return required("text.body")
    return content.body.length > 4096 ? invalidParameter("Param text.body must be at most 4096 characters") : undefined
  }
  if (MEDIA_TYPES.includes(type)) return checkMedia(type, content)
  if (type === "location") {
    return typeof content.latitude === "number" && typeof content.longitude === "number"
      ? undefined
      : required("location.latitude and location.longitude")
  }
  if (type === "reaction") return isText(content.message_id) ? undefined : required("reaction.message_id")
  if (type === "interactive") return checkInteractive(content)
  if (type === "template") {
    const language = isJsonObject(content.language) ? content.language : undefined
    if (!isText(content.name)) return required("template.name")
    if (!isText(language?.code)) return required("template.language.code")
  }
  return undefined
}

/** A send's type, checked with its content as Meta checks them. */
const checkedType = (body: JsonObject): Effect.Effect<string, UpstreamError> =>
  Effect.gen(function*() {
    const type = body.type ?? "text"
    if (typeof type !== "string" || !SENDABLE.has(type)) {
      return yield* Effect.fail(invalidParameter(`Param type must be one of {${messageTypes.join(", ")}}`))
    }
    if (body.context !== undefined && !(isJsonObject(body.context) && isText(body.context.message_id))) {
      return yield* Effect.fail(required("context.message_id"))
    }
    const problem = checkContent(type, body[type])
    if (problem !== undefined) return yield* Effect.fail(problem)
    return type
  })

/** The category of the approved template a template send names (lower case); a template the number lacks fails as Meta's does. */
const sentTemplateCategory = (
  body: JsonObject,
  type: string,
  approvedTemplate: (name: string, language: string) => Effect.Effect<{ readonly category: string } | undefined>
): Effect.Effect<string | undefined, UpstreamError> =>
  Effect.gen(function*() {
    const template = body.template
    if (
      type !== "template" || !isJsonObject(template) || !isText(template.name) || !isJsonObject(template.language) ||
      !isText(template.language.code)
    ) {
      return undefined
    }
    const found = yield* approvedTemplate(template.name, template.language.code)
    if (found === undefined) return yield* Effect.fail(templateMissing(template.name, template.language.code))
    return found.category.toLowerCase()
  })

export const acceptSend = (
  target: UpstreamTarget,
  body: JsonObject,
  approvedTemplate: (name: string, language: string) => Effect.Effect<{ readonly category: string } | undefined>
): Effect.Effect<AcceptedSend, UpstreamError> =>
  Effect.gen(function*() {
    yield* checkReserved(target.phoneNumberId)
    if (body.messaging_product !== "whatsapp") return yield* Effect.fail(required("messaging_product"))
    // A username user is addressed by their business-scoped user id, as Meta takes it (`to` wins when both are given).
    if (!isText(body.to) && isText(body.recipient)) {
      return yield* acceptUserSend(target, body, body.recipient, approvedTemplate)
    }
    const to = body.to
    if (!isText(to)) {
      return yield* Effect.fail(required("to"))
    }
    const group = body.recipient_type === "group"
    const waId = to.replace(/^\+/, "")
    if (!group && !/^\d{6,20}$/.test(waId)) {
      return yield* Effect.fail(invalidParameter("Invalid parameter", `to: ${to} is not a valid phone number`))
    }
    if (body.recipient_type !== undefined && body.recipient_type !== "individual" && !group) {
      return yield* Effect.fail(invalidParameter("Param recipient_type must be one of {individual, group}"))
    }
    const type = yield* checkedType(body)
    yield* checkReserved(waId)
    if (waId.startsWith(SYNC_WINDOW_PREFIX) && type !== "template") {
      return yield* Effect.fail(windowClosed())
    }

    const templateCategory = yield* sentTemplateCategory(body, type, approvedTemplate)
    const messageId = wamid(waId)
    return {
      response: {
        messaging_product: "whatsapp",
        contacts: [{ input: to, wa_id: waId }],
        messages: [type === "template" ? { id: messageId, message_status: "accepted" } : { id: messageId }]
      },
      messageId,
      recipient: { waId },
      outcome: waId.startsWith(ASYNC_WINDOW_PREFIX) && type !== "template" ? "window_closed" : "delivered",
      templateCategory
    }
  })

/**
 * A send to a username user's business-scoped user id: answered with contacts[{input, user_id}] and no
 * wa_id (the sandbox knows no number for them); an authentication template cannot go there (131062).
 */
const acceptUserSend = (
  target: UpstreamTarget,
  body: JsonObject,
  userId: string,
  approvedTemplate: (name: string, language: string) => Effect.Effect<{ readonly category: string } | undefined>
): Effect.Effect<AcceptedSend, UpstreamError> =>
  Effect.gen(function*() {
    if (!isBusinessScopedUserId(userId)) {
      return yield* Effect.fail(
        invalidParameter("Invalid parameter", `recipient: ${userId} is not a valid business-scoped user ID`)
      )
    }
    const type = yield* checkedType(body)
    const templateCategory = yield* sentTemplateCategory(body, type, approvedTemplate)
    if (templateCategory === "authentication" || body.category === "authentication") yield* checkReserved("999131062")
    const messageId = wamid(stableNumericId(`user:${target.phoneNumberId}:${userId}`, 12))
    return {
      response: {
        messaging_product: "whatsapp",
        contacts: [{ input: userId, user_id: userId }],
        messages: [type === "template" ? { id: messageId, message_status: "accepted" } : { id: messageId }]
      },
      messageId,
      recipient: { userId },
      outcome: "delivered",
      templateCategory
    }
  })

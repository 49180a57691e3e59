/**
 * The body of `POST /api/messages`: the spec's common fields plus exactly one content object, named
 * like `type`. One union member per type, so a request is checked against its own type's rules and
 * every failing field is reported at once. `toUpstreamBody` gives what is sent upstream.
 *
 * As the upstream does, a message with `text` and no `type` is a text message, and `recipient_type`
 * may be `group` (then `to` is a group id).
 */
import { Effect, ParseResult, Schema, SchemaAST } from "effect"
import { GraphId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"
import { isRecord, JsonObjectSchema } from "../Domain/Json.js"
import { BusinessScopedUserId } from "../Domain/UserIds.js"
import { messageTypes } from "../Domain/Vocabulary.js"
import { isGroupId } from "../Groups/GroupId.js"
import {
  absent,
  Audio,
  Contacts,
  Document,
  Image,
  Location,
  NonEmpty,
  optional,
  Reaction,
  Sticker,
  Text,
  Video
} from "./Content.js"
import { Interactive } from "./Interactive.js"
import { Template } from "./Template.js"

const PHONE_NUMBER = /^\d{5,20}$/
const NUMBER_RULE = "must be the recipient's number in E.164 form: 5 to 20 digits, without \"+\""

/**
 * The recipient: E.164 digits (one leading "+" is accepted and stripped, as the upstream expects the
 * bare digits), or a group id; which one recipient_type says (checked per message, see `addressed`).
 */
const Recipient = Schema.transform(
  Schema.String,
  Schema.String.pipe(
    Schema.filter((to) =>
      PHONE_NUMBER.test(to) || isGroupId(to) || `${NUMBER_RULE}, or a group id with recipient_type group`
    )
  ),
  { strict: true, decode: (to) => (to.startsWith("+") ? to.slice(1) : to), encode: (to) => to }
)

const UserRecipient = BusinessScopedUserId

/**
 * The queue's options (issue 32), the hub's own: never sent upstream. Any of them, or the header
 * `Prefer: respond-async`, queues the send (202); the window of `send_at` is checked against the clock
 * when the send is queued (SendQueue/QueuedSends.ts).
 */
const queueOptions = {
  send_at: optional(
    Schema.String.pipe(
      Schema.filter((text) => !Number.isNaN(Date.parse(text)) || "must be an ISO 8601 date and time")
    ).annotations({
      description: "When to send (ISO 8601), from now to 35 days ahead; the send is queued (202)",
      examples: ["2026-12-01T09:00:00Z"]
    })
  ),
  validity: optional(
    Schema.Int.pipe(
      Schema.between(1, 36_000, { message: () => "must be a whole number of seconds from 1 to 36000" })
    ).annotations({
      description:
        "Seconds a queued send may wait for its turn (after `send_at`) before it fails as `expired`; default HUB_QUEUE_VALIDITY (4 h)"
    })
  ),
  priority: optional(
    Schema.Literal("transactional", "bulk").annotations({
      message: () => ({ message: "must be transactional or bulk", override: true }),
      description: "A queued send's lane: `transactional` (the default) always goes before `bulk` of the same number"
    })
  )
}

const common = {
  messaging_product: Schema.optionalWith(
    Schema.Literal("whatsapp").annotations({ message: () => "must be \"whatsapp\"" }),
    {
      default: () => "whatsapp" as const
    }
  ),
  recipient_type: Schema.optionalWith(
    Schema.Literal("individual", "group").annotations({
      message: () => ({ message: "must be \"individual\" or \"group\"", override: true })
    }),
    { default: () => "individual" as const }
  ),
  to: optional(Recipient),
  /** The recipient's business-scoped user id, instead of `to` (a username user whose number is not known). */
  recipient: optional(UserRecipient),
  context: optional(Schema.Struct({ message_id: NonEmpty(256) })),
  /** Names the sending number; required with an organization token. Never sent upstream. */
  phone_number_id: optional(GraphId),
  /**
   * Which Graph endpoint carries the send: `auto` routes a MARKETING template to the Marketing
   * Messages API (`marketing_messages`), anything else to `messages`. Without it, the instance's
   * setting decides (`hub instance update --marketing-messages`). Never sent upstream.
   */
  via: optional(
    Schema.Literal("auto", "messages", "marketing_messages").annotations({
      message: () => ({ message: "must be auto, messages or marketing_messages", override: true })
    })
  ),
  ...queueOptions
}

const ONE_RECIPIENT =
  "give exactly one of to (the recipient's number, or a group id) and recipient (their business-scoped user id)"

/** Exactly one of `to` and `recipient`; `to` is a number for an individual, a group id for a group. */
const addressed = <
  A extends {
    readonly recipient_type: "individual" | "group"
    readonly to?: string | undefined
    readonly recipient?: string | undefined
  }
>(
  message: A
) => {
  if ((message.to === undefined) === (message.recipient === undefined)) return { path: ["to"], message: ONE_RECIPIENT }
  if (message.to === undefined) {
    return message.recipient_type === "individual" ||
      { path: ["recipient"], message: "is for individuals: a group is named by to" }
  }
  return message.recipient_type === "group"
    ? isGroupId(message.to) ||
      {
        path: ["to"],
        message: "must be a group id (<number>@g.us or the Cloud API's group id) when recipient_type is group"
      }
    : PHONE_NUMBER.test(message.to) || { path: ["to"], message: NUMBER_RULE }
}

const notThisType = absent("is not allowed: only the object named by type may be given")

/** Every content key absent; each member then overrides its own. */
const noContent = {
  text: notThisType,
  image: notThisType,
  audio: notThisType,
  video: notThisType,
  document: notThisType,
  sticker: notThisType,
  location: notThisType,
  contacts: notThisType,
  reaction: notThisType,
  template: notThisType,
  interactive: notThisType
}

const TextMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("text"), text: Text })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "TextMessage" })
const ImageMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("image"), image: Image })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "ImageMessage" })
const AudioMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("audio"), audio: Audio })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "AudioMessage" })
const VideoMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("video"), video: Video })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "VideoMessage" })
const DocumentMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("document"), document: Document })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "DocumentMessage" })
const StickerMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("sticker"), sticker: Sticker })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "StickerMessage" })
const LocationMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("location"), location: Location })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "LocationMessage" })
const ContactsMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("contacts"), contacts: Contacts })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "ContactsMessage" })
const ReactionMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("reaction"), reaction: Reaction })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "ReactionMessage" })
const TemplateMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("template"), template: Template })
  .pipe(Schema.filter(addressed)).annotations({ identifier: "TemplateMessage" })
const InteractiveMessage = Schema.Struct({
  ...common,
  ...noContent,
  type: Schema.Literal("interactive"),
  interactive: Interactive
})
  .pipe(Schema.filter(addressed)).annotations({ identifier: "InteractiveMessage" })

/** A text message without `type`: the upstream reads it as `type: "text"`, and so does the hub. */
const UntypedTextMessage = Schema.Struct({ ...common, ...noContent, text: Text }).annotations({
  identifier: "TextMessageWithoutType",
  description: "A text message may leave out type, as the upstream allows; it is sent with type text"
})

const typedMembers = [
  TextMessage,
  ImageMessage,
  AudioMessage,
  VideoMessage,
  DocumentMessage,
  StickerMessage,
  LocationMessage,
  ContactsMessage,
  ReactionMessage,
  TemplateMessage,
  InteractiveMessage
] as const

/** Every message with its `type`: the union picks the member by `type`, so errors name only its fields. */
const TypedMessage = Schema.Union(...typedMembers).annotations({
  message: () => "must be a JSON object",
  // As RequestStruct: report every failing field; unknown top-level keys are dropped, not refused.
  parseOptions: { errors: "all", onExcessProperty: "ignore" }
})

/** The upstream's default: `text` without `type` is a text message. */
const withDefaultType = (input: unknown): unknown =>
  isRecord(input) && input.type === undefined && input.text !== undefined ? { ...input, type: "text" } : input

/** The keys the hub models (checked by TypedMessage) or keeps for itself; every other key is forwarded. */
const MODELED_KEYS: ReadonlySet<string> = new Set([
  "messaging_product",
  "recipient_type",
  "to",
  "recipient",
  "type",
  "context",
  "phone_number_id",
  "via",
  "send_at",
  "validity",
  "priority",
  ...messageTypes
])

/** The keys of a send the hub does not model (`category`, `ttl`, `biz_opaque_callback_data`, whatever Meta adds next). */
const unmodeledKeys = (input: unknown): Readonly<Record<string, unknown>> | undefined => {
  if (!isRecord(input)) return undefined
  const entries = Object.entries(input).filter(([key]) => !MODELED_KEYS.has(key))
  return entries.length === 0 ? undefined : Object.fromEntries(entries)
}

const decodeJsonObject = ParseResult.decodeUnknown(JsonObjectSchema)

/** A message with the keys it carries beyond the modeled ones (undefined: none). */
type Forwarding<M> = M & { readonly forwarded?: JsonObject | undefined }

/**
 * The request: `type` defaulted as the upstream does, then TypedMessage. The default comes before the
 * union (not as a member without `type`, which the union would also try, and report, for every
 * other type's mistakes); the documentation shows both forms. Keys the hub does not model are kept
 * (`forwarded`) and sent to the upstream unchanged: the message Meta receives is the one the caller sent.
 */
export const SendMessageRequest = Schema.declare(
  [TypedMessage],
  {
    decode: (typed) => (input, options): Effect.Effect<Forwarding<typeof typed.Type>, ParseResult.ParseIssue> =>
      Effect.flatMap(ParseResult.decodeUnknown(typed)(withDefaultType(input), options), (message) => {
        const unmodeled = unmodeledKeys(input)
        return unmodeled === undefined
          ? Effect.succeed({ ...message, forwarded: undefined })
          : Effect.map(
            decodeJsonObject(unmodeled),
            (forwarded): Forwarding<typeof typed.Type> => ({ ...message, forwarded })
          )
      }),
    encode: (typed) => (input, options) => {
      if (!isRecord(input)) return ParseResult.encodeUnknown(typed)(input, options)
      const { forwarded, ...message } = input
      return Effect.map(
        ParseResult.encodeUnknown(typed)(message, options),
        (encoded) => (isRecord(forwarded) ? { ...forwarded, ...encoded } : encoded)
      )
    }
  },
  {
    identifier: "SendMessageRequest",
    description:
      "A message of any type, to `to` (a number or a group id) or `recipient` (a business-scoped user id), exactly one. " +
      "Fields the hub does not model (Direct Send's `category` and `ttl`, `direct_send_config`, `biz_opaque_callback_data`, " +
      "`recipient_identity_key_hash`, and whatever Meta adds) are forwarded to the Graph unchanged; `phone_number_id`, `via` and the queue's `send_at`, `validity` and `priority` are the hub's own.",
    [SchemaAST.SurrogateAnnotationId]: Schema.Union(...typedMembers, UntypedTextMessage).ast
  }
)
export type SendMessageRequest = typeof SendMessageRequest.Type

const content = (message: SendMessageRequest): JsonObject => {
  switch (message.type) {
    case "text":
      return { text: message.text }
    case "image":
      return { image: message.image }
    case "audio":
      return { audio: message.audio }
    case "video":
      return { video: message.video }
    case "document":
      return { document: message.document }
    case "sticker":
      return { sticker: message.sticker }
    case "location":
      return { location: message.location }
    case "contacts":
      return { contacts: message.contacts }
    case "reaction":
      return { reaction: message.reaction }
    case "template":
      return { template: message.template }
    case "interactive":
      return { interactive: message.interactive }
  }
}

/**
 * The body sent upstream: the keys the hub does not model as given, then the modeled ones normalised
 * (defaults filled, `to` stripped of its "+"); `phone_number_id` and `via` (the hub's own) are left out.
 */
export const toUpstreamBody = (message: SendMessageRequest): JsonObject => ({
  ...message.forwarded,
  messaging_product: message.messaging_product,
  recipient_type: message.recipient_type,
  ...(message.to === undefined ? {} : { to: message.to }),
  ...(message.recipient === undefined ? {} : { recipient: message.recipient }),
  type: message.type,
  ...(message.context === undefined ? {} : { context: message.context }),
  ...content(message)
})

/**
 * The body of `POST /api/messages`: the spec's common fields plus exactly one content object, named
 * like `type`. One union member per type, so a request is checked against its own type's rules and
 * every failing field is reported at once. `toUpstreamBody` gives what is sent upstream.
 */
import { Schema } from "effect"
import { GraphId } from "../Domain/Ids.js"
import type { JsonObject } from "../Upstream/Upstream.js"
import { absent, Audio, Contacts, Document, Image, Location, NonEmpty, optional, Reaction, Sticker, Text, Video } from "./Content.js"
import { Interactive } from "./Interactive.js"
import { Template } from "./Template.js"

export const messageTypes = [
  "text",
  "image",
  "audio",
  "video",
  "document",
  "sticker",
  "location",
  "contacts",
  "reaction",
  "template",
  "interactive"
] as const
export type MessageType = (typeof messageTypes)[number]

/** E.164 digits; one leading "+" is accepted and stripped, as the upstream expects the bare digits. */
const Recipient = Schema.transform(
  Schema.String,
  Schema.String.pipe(
    Schema.pattern(/^\d{5,20}$/, { message: () => "must be the recipient's number in E.164 form: 5 to 20 digits, without \"+\"" })
  ),
  { strict: true, decode: (to) => (to.startsWith("+") ? to.slice(1) : to), encode: (to) => to }
)

const common = {
  messaging_product: Schema.optionalWith(Schema.Literal("whatsapp").annotations({ message: () => "must be \"whatsapp\"" }), {
    default: () => "whatsapp" as const
  }),
  recipient_type: Schema.optionalWith(Schema.Literal("individual").annotations({ message: () => "must be \"individual\"" }), {
    default: () => "individual" as const
  }),
  to: Recipient,
  context: optional(Schema.Struct({ message_id: NonEmpty(256) })),
  /** Names the sending number; required with an organization token. Never sent upstream. */
  phone_number_id: optional(GraphId)
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
  .annotations({ identifier: "TextMessage" })
const ImageMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("image"), image: Image })
  .annotations({ identifier: "ImageMessage" })
const AudioMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("audio"), audio: Audio })
  .annotations({ identifier: "AudioMessage" })
const VideoMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("video"), video: Video })
  .annotations({ identifier: "VideoMessage" })
const DocumentMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("document"), document: Document })
  .annotations({ identifier: "DocumentMessage" })
const StickerMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("sticker"), sticker: Sticker })
  .annotations({ identifier: "StickerMessage" })
const LocationMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("location"), location: Location })
  .annotations({ identifier: "LocationMessage" })
const ContactsMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("contacts"), contacts: Contacts })
  .annotations({ identifier: "ContactsMessage" })
const ReactionMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("reaction"), reaction: Reaction })
  .annotations({ identifier: "ReactionMessage" })
const TemplateMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("template"), template: Template })
  .annotations({ identifier: "TemplateMessage" })
const InteractiveMessage = Schema.Struct({ ...common, ...noContent, type: Schema.Literal("interactive"), interactive: Interactive })
  .annotations({ identifier: "InteractiveMessage" })

export const SendMessageRequest = Schema.Union(
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
).annotations({
  identifier: "SendMessageRequest",
  message: () => "must be a JSON object",
  // As RequestStruct: report every failing field; unknown top-level keys are dropped, not refused.
  parseOptions: { errors: "all", onExcessProperty: "ignore" }
})
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

/** The normalised body sent upstream: defaults filled, `to` stripped, `phone_number_id` and unknown keys left out. */
export const toUpstreamBody = (message: SendMessageRequest): JsonObject => ({
  messaging_product: message.messaging_product,
  recipient_type: message.recipient_type,
  to: message.to,
  type: message.type,
  ...(message.context === undefined ? {} : { context: message.context }),
  ...content(message)
})

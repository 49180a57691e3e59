/** Messages: send one message (every type) and list the message history (organization or instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { ParseResult, Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { Cursor, PageFields, SCAN_WINDOW } from "../Domain/Paging.js"
import { IsoTimestamp, RequestStruct, WholeNumberText } from "../Domain/Schemas.js"
import { UserIdentifier } from "../Domain/UserIds.js"
import { directions, failureReasons, messageStatuses, priorities } from "../Domain/Vocabulary.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"
import { sendEndpoints } from "../Upstream/Upstream.js"
import { SendMessageRequest } from "./MessageSchemas.js"

const Extra = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** The upstream's answer, passed through unchanged (fields beyond the spec's included). */
const SendMessageResponse = Schema.Struct(
  {
    messaging_product: Schema.String,
    contacts: Schema.Array(Schema.Struct({ input: Schema.String, wa_id: Schema.optional(Schema.String) }, Extra)),
    messages: Schema.Array(Schema.Struct({ id: Schema.String }, Extra))
  },
  Extra
).annotations({ identifier: "SendMessageResponse" })

export const SendHeaders = RequestStruct({
  "idempotency-key": Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^[\x21-\x7e]{1,255}$/, { message: () => "must be 1 to 255 visible ASCII characters" })
    ).annotations({
      description: "Repeating a request with the same key and body within 24 hours returns the first answer"
    })
  ),
  prefer: Schema.optional(Schema.String.annotations({
    description: "`respond-async` queues the send: 202 once it is on the disk, sent at the number's pace (RFC 7240)"
  }))
})

/** A queued send's answer (202): its record's id, and when it may go and until when it may wait. */
export const QueuedSend = Schema.Struct({
  id: Schema.String.annotations({
    description: "The message record's id (GET /api/messages, DELETE /api/messages/{id})"
  }),
  status: Schema.Literal("pending"),
  send_at: IsoTimestamp.annotations({ description: "When the send may go: `send_at`, or when it was queued" }),
  expires_at: IsoTimestamp.annotations({
    description: "Past this, a send still queued ends `failed` with failureReason `expired` (send_at + validity)"
  })
}).annotations({ identifier: "QueuedSend" })

/** A date filter: a bare day (UTC) or an instant, normalised to an ISO 8601 UTC timestamp. */
export const DateBound = Schema.Struct({ day: Schema.Boolean, iso: Schema.String })
export type DateBound = typeof DateBound.Type

const DAY = /^\d{4}-\d{2}-\d{2}$/
const INSTANT = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(?::\d{2})?)(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})?$/i

const isCalendarDay = (day: string) => {
  const at = new Date(`${day}T00:00:00.000Z`)
  return !Number.isNaN(at.getTime()) && at.toISOString().startsWith(day)
}

const parseDateBound = (text: string): DateBound | undefined => {
  if (DAY.test(text)) return isCalendarDay(text) ? { day: true, iso: `${text}T00:00:00.000Z` } : undefined
  const match = INSTANT.exec(text)
  if (match === null) return undefined
  const [, date = "", time = "", fraction = "", zone = "Z"] = match
  // A timestamp without zone is UTC; "+0200" is written "+02:00" for the Date parser.
  const offset = zone.length === 5 ? `${zone.slice(0, 3)}:${zone.slice(3)}` : zone.toUpperCase()
  const at = new Date(
    `${date}T${time.length === 5 ? `${time}:00` : time}.${fraction.padEnd(3, "0").slice(0, 3)}${offset}`
  )
  return isCalendarDay(date) && !Number.isNaN(at.getTime()) ? { day: false, iso: at.toISOString() } : undefined
}

const DateFilter = Schema.transformOrFail(Schema.String, DateBound, {
  strict: true,
  decode: (text, _, ast) => {
    const bound = parseDateBound(text)
    return bound === undefined
      ? ParseResult.fail(new ParseResult.Type(ast, text, "must be an ISO 8601 timestamp or a date YYYY-MM-DD"))
      : ParseResult.succeed(bound)
  },
  encode: (bound) => ParseResult.succeed(bound.iso)
})

const oneIssue = (message: string) => ({ message: () => ({ message, override: true }) })
const Status = Schema.Literal(...messageStatuses).annotations(oneIssue(`must be one of ${messageStatuses.join(", ")}`))
const Direction = Schema.Literal(...directions).annotations(oneIssue(`must be ${directions.join(" or ")}`))
const WaMessageId = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(256)
)

const ListMessagesQuery = RequestStruct({
  page: Schema.optionalWith(WholeNumberText(1, 1_000_000), { default: () => 1 }),
  limit: Schema.optionalWith(WholeNumberText(1, 100), { default: () => 50 }),
  status: Schema.optional(Status),
  direction: Schema.optional(Direction),
  startDate: Schema.optional(DateFilter),
  start_date: Schema.optional(DateFilter),
  endDate: Schema.optional(DateFilter),
  end_date: Schema.optional(DateFilter),
  waMessageId: Schema.optional(WaMessageId),
  wa_message_id: Schema.optional(WaMessageId),
  user: Schema.optional(UserIdentifier).annotations({
    description:
      "One person's history: their number or business-scoped user id; records under any identifier the hub has " +
      "learned for them (a webhook or send answer naming both, a number or user id change) are included"
  }),
  before: Schema.optional(Cursor),
  after: Schema.optional(Cursor),
  ...instanceSelectorFields
})

export const MessageRecord = Schema.Struct({
  id: Schema.String,
  waMessageId: Schema.NullOr(Schema.String).annotations({
    description: "Upstream message id; null until the upstream accepted the send"
  }),
  to: Schema.String.annotations({
    description:
      "The customer's number: the recipient of an outbound message, the sender of an inbound one; their business-scoped " +
      "user id (BSUID) when no number is known (a username user)"
  }),
  userId: Schema.optional(Schema.String).annotations({
    description: "The customer's business-scoped user id (BSUID), when known"
  }),
  parentUserId: Schema.optional(Schema.String).annotations({
    description: "Their parent BSUID across linked portfolios, when known"
  }),
  username: Schema.optional(Schema.String).annotations({
    description: "Their WhatsApp username, when known (for display: it may change)"
  }),
  category: Schema.optional(Schema.String).annotations({
    description: "The send's `category` (Direct Send: utility, authentication), when given"
  }),
  failureReason: Schema.optional(Schema.Literal(...failureReasons)).annotations({
    description:
      "Why a queued send ended `failed` without being sent: its validity ended (`expired`), it was cancelled " +
      "(`cancelled`), Meta refused it (`refused`, the upstream's code in `error`), or its Graph call went unanswered " +
      "so it was not sent again (`outcome_unknown`: it may have reached the person; if Meta's status for it " +
      "arrives, naming the person, the record takes its id, loses this reason and follows the status)"
  }),
  sendAt: Schema.optional(IsoTimestamp).annotations({ description: "A queued send's `send_at`" }),
  expiresAt: Schema.optional(IsoTimestamp).annotations({ description: "Until when a queued send may wait" }),
  priority: Schema.optional(Schema.Literal(...priorities)).annotations({ description: "A queued send's lane" }),
  endpoint: Schema.optional(Schema.Literal(...sendEndpoints)).annotations({
    description:
      "The Graph endpoint that carried a send: `messages`, or `marketing_messages` (the Marketing Messages API)"
  }),
  origin: Schema.optional(Schema.String).annotations({
    description:
      "Where a record not sent through the hub came from: `smb_message_echoes` (sent from the WhatsApp Business app), " +
      "`message_echoes` (another sender on the number), `standby` (while Meta's Business Agent held the conversation), " +
      "`history` (synchronised at onboarding)"
  }),
  type: Schema.String,
  status: Schema.Literal(...messageStatuses),
  direction: Schema.Literal(...directions),
  createdAt: IsoTimestamp,
  statusTimes: Schema.Struct({
    sent: Schema.optional(IsoTimestamp),
    delivered: Schema.optional(IsoTimestamp),
    read: Schema.optional(IsoTimestamp),
    failed: Schema.optional(IsoTimestamp)
  }).annotations({
    description:
      "When the message reached each status step, as the upstream's status events say (a refused send: when the hub " +
      "was refused). A step the upstream skipped, or that arrived before an earlier step's event, has no time; `pending` is `createdAt`."
  })
})

export const MessageList = Schema.Struct({
  data: Schema.Array(MessageRecord),
  total: Schema.Number,
  page: Schema.Number,
  limit: Schema.Number,
  ...PageFields
})

/** A text message to a number: works from Swagger UI with an instance token (an organization token adds phone_number_id). */
const SEND_EXAMPLE = {
  messaging_product: "whatsapp",
  recipient_type: "individual",
  to: "16505551234",
  type: "text",
  text: { body: "Hello from the Messaging Hub" }
} as const

export class MessagesApi extends HttpApiGroup.make("messages")
  .annotate(OpenApi.Description, "Send messages and list the message history.")
  .add(
    HttpApiEndpoint.post("send", "/api/messages")
      .setPayload(SendMessageRequest)
      .setHeaders(SendHeaders)
      .addSuccess(SendMessageResponse)
      .addSuccess(QueuedSend, { status: 202 })
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.PayloadTooLarge)
      .addError(UpstreamErrors)
      .addError(Wire.ServiceUnavailable)
      .pipe(
        accepts(apiTokens),
        documented(
          "Send a message",
          "Sends one message of any type (text, image, audio, video, document, sticker, location, contacts, reaction, " +
            "template, interactive) through the upstream and records it as `pending`; status events move it on. " +
            "An organization token names the sending number with `phone_number_id`; an instance token sends from its own. " +
            "With an `Idempotency-Key` header a repeated request returns the first answer (marked `Idempotent-Replayed: true`) " +
            "instead of sending again. Sends are paced per phone number at its live throughput level: over it the answer is 429 " +
            "with Retry-After. With `Prefer: respond-async`, `send_at`, `validity` or `priority` the send is queued instead: " +
            "202 once it is on the disk, then sent at the number's pace (transactional before bulk, per person in order and " +
            "within Meta's pair rate), retried on throttling, maintenance and Graph 5xx until its validity ends, never sent " +
            "twice (a Graph call left unanswered ends `failed` with failureReason `outcome_unknown`). A number's queue holds " +
            "HUB_QUEUE_MAX_HOURS of its throughput; beyond it 429 with Retry-After.",
          { example: SEND_EXAMPLE }
        )
      )
  )
  .add(
    HttpApiEndpoint.del("cancel", "/api/messages/:messageId")
      .setPath(Schema.Struct({ messageId: Schema.String }))
      .addSuccess(MessageRecord)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .pipe(
        accepts(apiTokens),
        documented(
          "Cancel a queued send",
          "Takes a queued send out of its number's queue before it goes: its record ends `failed` with failureReason " +
            "`cancelled` and is answered. 409 once the send is being made or has ended; 404 for a message the token cannot see."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/api/messages")
      .setUrlParams(ListMessagesQuery)
      .addSuccess(MessageList)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "List the message history",
          "Messages sent and received, newest first, in pages (`page`, `limit` up to 100), filtered by status, direction, " +
            "date range (`startDate`/`endDate`, ISO 8601 or YYYY-MM-DD, a bare end date inclusive), upstream message id and person " +
            "(`user`: a number or business-scoped user id, with every identifier learned for them). " +
            "An instance token sees its instance; an organization token sees all of its instances unless it names one. " +
            `A \`direction\` or \`status=pending\` filter, which no index serves, examines at most ${SCAN_WINDOW} records a page: ` +
            "the page may then hold fewer matches than `limit`, `total_capped` is true and `cursors.before` goes on."
        )
      )
  )
  .middleware(Authentication)
{}

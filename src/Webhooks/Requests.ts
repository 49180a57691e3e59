/**
 * What the webhooks endpoints take (Api.ts declares them): the payloads of create, update and recover,
 * the delivery log's query parameters, the test's Idempotency-Key header and the paths' ids.
 */
import { ParseResult, Schema } from "effect"
import { ALL_KINDS, EVENT_KINDS, isEventKind } from "../Domain/EventKinds.js"
import { Cursor } from "../Domain/Paging.js"
import { IdString, Label, RequestStruct } from "../Domain/Schemas.js"
import { deliveryStatuses, webhookKinds, webhookOrderings } from "../Domain/Vocabulary.js"
import { CustomHeadersInput } from "./CustomHeaders.js"

const WebhookUrl = Schema.Trim.pipe(
  Schema.maxLength(2048, { message: () => "must be at most 2048 characters" }),
  Schema.filter((s) => {
    const url = URL.parse(s)
    if (url === null || (url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") {
      return "must be an http or https URL"
    }
    // They would be stored and shown in the record as given, and never sent: deliveries do not use them.
    return (url.username === "" && url.password === "") ||
      "must not hold credentials (user:password@): credentials in URLs are not allowed; send them in a custom header such as authorization"
  })
).annotations({
  description:
    "http(s) URL that receives the events; without credentials (user:password@): give them as a custom header",
  examples: ["https://example.com/hooks/whatsapp"]
})

const kindRule =
  `must be "*" or a webhook field name of the upstream's form (lower case letters, digits and _, at most 64 characters), such as ${
    EVENT_KINDS.slice(0, 4).join(", ")
  }`

/** Filters name at most this many kinds (more than Meta has fields). */
const MAX_KINDS = 100

/** One kind of change: a refinement rather than a Literal union, so a wrong name is one issue. */
const EventKindName = Schema.String.pipe(
  Schema.filter((s) => s === ALL_KINDS || isEventKind(s), {
    message: () => kindRule,
    // The document shows the pattern and lists the known kinds, so generated clients and the dashboard know them.
    jsonSchema: {
      anyOf: [{ enum: [ALL_KINDS, ...EVENT_KINDS] }, { type: "string", pattern: "^[a-z][a-z0-9_]{0,63}$" }]
    }
  })
).annotations({
  description: `A kind of change, or "*" for all; the known ones: ${
    EVENT_KINDS.join(", ")
  }; any other field Meta adds may be named too`
})

export const EventFilter = Schema.Array(EventKindName).pipe(
  Schema.minItems(1, { message: () => `must name at least one kind (or "*" for all)` }),
  Schema.maxItems(MAX_KINDS, { message: () => `must name at most ${MAX_KINDS} kinds` })
).annotations({
  description: "The kinds of change the webhook receives; absent or [\"*\"] for all. `messages`: inbound messages; " +
    "`statuses`: status updates of sent messages; `errors`: changes carrying only errors; every other kind is the " +
    "upstream's change field of that name (`calls`, `account_update`, `message_template_status_update`, …). " +
    "A delivery holds only the changes of the kinds taken, each unaltered; an event with none makes no delivery.",
  examples: [["messages", "statuses"], ["*"]]
})

export const Ordering = Schema.Literal(...webhookOrderings).annotations({
  description: "`per_contact`: the deliveries about one person (the user's BSUID, else number) go one at a time, " +
    "in the order the hub received them; the next waits until the one before succeeded or is dead, and a failing " +
    "one holds back only that person's (counted in queued.held). An event about several persons is delivered as " +
    "one envelope per person; changes about no person (account, template, group changes) are never held. " +
    "`none` (default): every delivery goes as soon as it can.",
  examples: ["per_contact"]
})

export const CreateWebhook = RequestStruct({
  instance_id: Schema.optional(IdString).annotations({ description: "Required with an organization token" }),

  url: Schema.optional(WebhookUrl).annotations({ description: "Required for a push webhook; a poll webhook has none" }),
  name: Label(100),
  kind: Schema.optional(Schema.Literal(...webhookKinds)).annotations({
    description:
      "push (the default): its events are POSTed to `url`; poll: nothing is pushed, its events wait in the hub for GET /api/webhooks/{id}/poll"
  }),
  events: Schema.optional(EventFilter),
  headers: Schema.optional(CustomHeadersInput),
  ordering: Schema.optional(Ordering)
}).pipe(
  Schema.filter((input) =>
    input.kind === "poll"
      ? input.url === undefined || { path: ["url"], message: "a poll webhook has no url: leave it out" }
      : input.url !== undefined ||
        { path: ["url"], message: "is required (or give kind \"poll\" for a webhook you poll)" }
  )
)

export const UpdateWebhook = RequestStruct({
  url: Schema.optional(WebhookUrl),
  name: Schema.optional(Label(100)),
  active: Schema.optional(Schema.Boolean),
  events: Schema.optional(EventFilter),
  headers: Schema.optional(CustomHeadersInput),
  ordering: Schema.optional(Ordering.annotations({
    description: "Turning it to `none` lets every held delivery go at once; turning it on orders new deliveries"
  }))
}).pipe(
  Schema.filter((patch) =>
    Object.values(patch).some((value) => value !== undefined) ||
    "give at least one of url, name, active, events, headers, ordering"
  )
)

export const ListWebhooksQuery = RequestStruct({
  instance_id: Schema.optional(IdString),
  event: Schema.optional(EventKindName).annotations({ description: "Only webhooks that receive this kind" })
})

const deliveryStatusSet: ReadonlySet<string> = new Set(deliveryStatuses)

/** A refinement rather than a Literal union, so a wrong value is reported once, not once per member. */
export const DeliveryStatus = Schema.String.pipe(
  Schema.filter((s): s is typeof deliveryStatuses[number] => deliveryStatusSet.has(s), {
    message: () => `must be one of ${deliveryStatuses.join(", ")}`
  })
)

const PositiveInt = (max: number, fallback: number) =>
  Schema.optionalWith(
    Schema.NumberFromString.pipe(
      Schema.int({ message: () => "must be a whole number" }),
      Schema.between(1, max, { message: () => `must be from 1 to ${max}` })
    ),
    { default: () => fallback }
  )

const INSTANT = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i

/** An instant (ISO 8601; without a zone, UTC) or a day (its midnight UTC), normalised to an ISO 8601 UTC timestamp. */
export const Instant = Schema.transformOrFail(Schema.String, Schema.String, {
  strict: true,
  decode: (text, _, ast) => {
    const trimmed = text.trim()
    // A bare day is its midnight UTC; a time without a zone is UTC; "+0200" is written "+02:00" for the Date parser.
    const zoned = /^\d{4}-\d{2}-\d{2}$/.test(trimmed)
      ? `${trimmed}T00:00:00Z`
      : /(?:Z|[+-]\d{2}:?\d{2})$/i.test(trimmed)
      ? trimmed.replace(/([+-]\d{2})(\d{2})$/, "$1:$2")
      : `${trimmed}Z`
    const at = INSTANT.test(trimmed) ? new Date(zoned.replace(" ", "T")) : undefined
    return at === undefined || Number.isNaN(at.getTime())
      ? ParseResult.fail(new ParseResult.Type(ast, text, "must be an ISO 8601 timestamp or a date YYYY-MM-DD"))
      : ParseResult.succeed(at.toISOString())
  },
  encode: ParseResult.succeed
}).annotations({
  description: "ISO 8601 timestamp (UTC without a zone) or a date YYYY-MM-DD (its midnight UTC)",
  examples: ["2026-11-21T14:00:00Z"]
})

const deliveryListFields = {
  page: PositiveInt(1_000_000, 1),
  limit: PositiveInt(100, 50),
  status: Schema.optional(DeliveryStatus),
  since: Schema.optional(Instant).annotations({ description: "Deliveries created at or after this" }),
  until: Schema.optional(Instant).annotations({ description: "Deliveries created before this" }),
  before: Schema.optional(Cursor),
  after: Schema.optional(Cursor)
}

export const DeliveriesQuery = RequestStruct(deliveryListFields)

export const DeliverySearchQuery = RequestStruct({
  ...deliveryListFields,
  webhook_id: Schema.optional(IdString).annotations({ description: "One of the caller's webhooks" }),
  instance_id: Schema.optional(IdString).annotations({ description: "One of the caller's instances" })
})

export const RecoverRequest = RequestStruct({
  since: Instant.annotations({ description: "Recover deliveries created at or after this" }),
  until: Schema.optional(Instant).annotations({ description: "…and before this (default: now)" })
})

/** An Idempotency-Key header's value. */
export const IdempotencyKey = Schema.String.pipe(
  Schema.pattern(/^[\x21-\x7e]{1,255}$/, { message: () => "must be 1 to 255 visible ASCII characters" })
)

export const TestHeaders = RequestStruct({
  "idempotency-key": Schema.optional(IdempotencyKey).annotations({
    description:
      "Repeating a test with the same key within 10 minutes answers the first test's delivery instead of sending another"
  })
})

export const WebhookPath = Schema.Struct({ id: IdString })

export const DeliveryPath = Schema.Struct({ id: IdString, deliveryId: IdString })

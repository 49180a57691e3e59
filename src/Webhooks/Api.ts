/**
 * Webhooks of an instance (organization tokens for their instances, instance tokens for their own):
 * the spec's create / update / delete, plus list, read, event filters, custom headers, health, the
 * delivery log (per webhook and organization-wide), replay, recover, test events and secret rotation.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { ParseResult, Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { ALL_KINDS, EVENT_KINDS, isEventKind } from "../Domain/EventKinds.js"
import { Cursor, PageFields } from "../Domain/Paging.js"
import { IdString, IsoTimestamp, Label, RequestStruct } from "../Domain/Schemas.js"
import { deliveryStatuses, disabledReasons } from "../Domain/Vocabulary.js"
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

const EventFilter = Schema.Array(EventKindName).pipe(
  Schema.minItems(1, { message: () => `must name at least one kind (or "*" for all)` }),
  Schema.maxItems(MAX_KINDS, { message: () => `must name at most ${MAX_KINDS} kinds` })
).annotations({
  description: "The kinds of change the webhook receives; absent or [\"*\"] for all. `messages`: inbound messages; " +
    "`statuses`: status updates of sent messages; `errors`: changes carrying only errors; every other kind is the " +
    "upstream's change field of that name (`calls`, `account_update`, `message_template_status_update`, …). " +
    "A delivery holds only the changes of the kinds taken, each unaltered; an event with none makes no delivery.",
  examples: [["messages", "statuses"], ["*"]]
})

const CreateWebhook = RequestStruct({
  instance_id: Schema.optional(IdString).annotations({ description: "Required with an organization token" }),
  url: WebhookUrl,
  name: Label(100),
  events: Schema.optional(EventFilter),
  headers: Schema.optional(CustomHeadersInput)
})

const UpdateWebhook = RequestStruct({
  url: Schema.optional(WebhookUrl),
  name: Schema.optional(Label(100)),
  active: Schema.optional(Schema.Boolean),
  events: Schema.optional(EventFilter),
  headers: Schema.optional(CustomHeadersInput)
}).pipe(
  Schema.filter((patch) =>
    Object.values(patch).some((value) => value !== undefined) ||
    "give at least one of url, name, active, events, headers"
  )
)

const Count = Schema.Number.annotations({ description: "A count" })

export const WebhookRecord = Schema.Struct({
  id: Schema.String,
  instance_id: Schema.String,
  url: Schema.String,
  name: Schema.String,
  active: Schema.Boolean,
  events: Schema.Array(Schema.String).annotations({ description: "The kinds of change it receives; [\"*\"] for all" }),
  headers: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
    description: "Its custom headers; values of headers named like secrets are shown as \"[redacted]\""
  }),
  disabled_reason: Schema.NullOr(Schema.Literal(...disabledReasons)).annotations({
    description:
      "Why it is inactive: gone_410 (a receiver answered 410), failing_too_long (no success for HUB_WEBHOOK_DISABLE_AFTER), manual (PATCH active: false); null while active"
  }),
  failing_since: Schema.NullOr(IsoTimestamp).annotations({
    description: "When its current run of failed attempts began; null after a success"
  }),
  last_success_at: Schema.NullOr(IsoTimestamp).annotations({ description: "When a delivery to it last succeeded" }),
  deliveries_24h: Schema.Struct({
    succeeded: Count,
    failed: Count.annotations({ description: "Failed attempts after which a retry was scheduled" }),
    dead: Count.annotations({ description: "Deliveries given up after their last attempt" })
  }).annotations({
    description: "Outcomes of attempts in the last 24 hourly buckets (the current hour so far and the 23 before it)"
  }),
  queued: Schema.Struct({
    pending: Count.annotations({ description: "Deliveries waiting for an attempt" }),
    failed: Count.annotations({ description: "Deliveries waiting for a retry" }),
    capped: Schema.optional(Schema.Boolean).annotations({ description: "True when a count stopped at 1,000" })
  }).annotations({ description: "Its deliveries queued now" }),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp
})

export const WebhookCreated = Schema.Struct({
  ...WebhookRecord.fields,
  secret: Schema.String.annotations({ description: "Signing secret (whsec_…); shown only in this response" })
})

export const SecretRotated = Schema.Struct({
  secret: Schema.String.annotations({ description: "The new signing secret; shown only in this response" }),
  previous_secret_expires_at: IsoTimestamp.annotations({ description: "Until then deliveries carry both signatures" })
})

const deliveryStatusSet: ReadonlySet<string> = new Set(deliveryStatuses)

/** A refinement rather than a Literal union, so a wrong value is reported once, not once per member. */
const DeliveryStatus = Schema.String.pipe(
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
const Instant = Schema.transformOrFail(Schema.String, Schema.String, {
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

const DeliveriesQuery = RequestStruct(deliveryListFields)

const DeliverySearchQuery = RequestStruct({
  ...deliveryListFields,
  webhook_id: Schema.optional(IdString).annotations({ description: "One of the caller's webhooks" }),
  instance_id: Schema.optional(IdString).annotations({ description: "One of the caller's instances" })
})

export const Attempt = Schema.Struct({
  attempt: Schema.Number,
  started_at: IsoTimestamp,
  status_code: Schema.NullOr(Schema.Number),
  latency_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response_snippet: Schema.NullOr(Schema.String).annotations({ description: "First KB of the receiver's answer" })
})

export const Delivery = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  event_id: Schema.String,
  message_id: Schema.String.annotations({ description: "The webhook-id header: the same on every attempt" }),
  status: DeliveryStatus.annotations({
    description:
      "pending (due for an attempt), failed (a retry is scheduled at next_attempt_at), succeeded, dead (no more attempts), cancelled"
  }),
  attempts: Schema.Number,
  next_attempt_at: Schema.NullOr(IsoTimestamp).annotations({
    description: "When it is due; a pending delivery is due from its creation"
  }),
  last_status_code: Schema.NullOr(Schema.Number),
  last_error: Schema.NullOr(Schema.String),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
  attempt_log: Schema.Array(Attempt)
})

export const DeliveryList = Schema.Struct({
  data: Schema.Array(Delivery),
  total: Schema.Number,
  page: Schema.Number,
  limit: Schema.Number,
  ...PageFields
}).annotations({
  description:
    "Newest first. Totals beyond 10,000 are capped (total_capped). status=succeeded has no index of its own: " +
    "a page examines at most 20,000 deliveries and then answers what it found, cursors.before continuing from there."
})

const RecoverRequest = RequestStruct({
  since: Instant.annotations({ description: "Recover deliveries created at or after this" }),
  until: Schema.optional(Instant).annotations({ description: "…and before this (default: now)" })
})

export const RECOVER_MAX = 10_000

export const Recovered = Schema.Struct({
  requeued: Schema.Number.annotations({
    description: `Failed or dead deliveries queued again by this call (at most ${RECOVER_MAX})`
  }),
  more: Schema.Boolean.annotations({
    description: "True when more wait in the window: call again to queue the next ones"
  }),
  since: IsoTimestamp,
  until: IsoTimestamp
})

const TestHeaders = RequestStruct({
  "idempotency-key": Schema.optional(
    Schema.String.pipe(
      Schema.pattern(/^[\x21-\x7e]{1,255}$/, { message: () => "must be 1 to 255 visible ASCII characters" })
    )
  ).annotations({
    description:
      "Repeating a test with the same key within 10 minutes answers the first test's delivery instead of sending another"
  })
})

const WebhookPath = Schema.Struct({ id: IdString })

export class WebhooksApi extends HttpApiGroup.make("webhooks")
  .annotate(
    OpenApi.Description,
    "Webhooks that receive the upstream's events for an instance, signed (Standard Webhooks), with their delivery log."
  )
  .add(
    HttpApiEndpoint.post("create", "/api/webhooks")
      .setPayload(CreateWebhook)
      .addSuccess(WebhookCreated, { status: 201 })
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Register a webhook",
          "The URL receives the upstream events of the instance (all of them, or the kinds `events` names) as a signed POST " +
            "(Standard Webhooks headers, signed with the `secret` in this answer, shown only now). An organization token names " +
            "the instance with `instance_id`. 409 `webhook_limit_reached` when the instance already has HUB_WEBHOOKS_PER_INSTANCE webhooks (default 10).",
          { example: { url: "https://example.com/hooks/whatsapp", name: "My receiver" } }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/api/webhooks")
      .setUrlParams(RequestStruct({
        instance_id: Schema.optional(IdString),
        event: Schema.optional(EventKindName).annotations({ description: "Only webhooks that receive this kind" })
      }))
      .addSuccess(Schema.Struct({ data: Schema.Array(WebhookRecord) }))
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "List webhooks",
          "The webhooks of the token's instance, or of the organization's instances (one with `instance_id`)."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(WebhookRecord)
      .addError(Wire.NotFound)
      .pipe(accepts(apiTokens), documented("Read a webhook"))
  )
  .add(
    HttpApiEndpoint.patch("update", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .setPayload(UpdateWebhook)
      .addSuccess(WebhookRecord)
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Update a webhook",
          "Changes its `url`, `name`, `events` or `headers` (a secret header given as \"[redacted]\" keeps its value), or turns it off and on with `active`.",
          { example: { active: false } }
        )
      )
  )
  .add(
    HttpApiEndpoint.del("remove", "/api/webhooks/:id")
      .setPath(WebhookPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Wire.NotFound)
      .pipe(accepts(apiTokens), documented("Delete a webhook", "Its pending deliveries are cancelled."))
  )
  .add(
    HttpApiEndpoint.get("deliveries", "/api/webhooks/:id/deliveries")
      .setPath(WebhookPath)
      .setUrlParams(DeliveriesQuery)
      .addSuccess(DeliveryList)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "List a webhook's deliveries",
          "Newest first, each with its attempts (status code, latency, error); filter by `status`, `since`, `until`; page with " +
            "`page` (at most 10,000 rows deep) or the `before`/`after` cursors."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("searchDeliveries", "/api/deliveries")
      .setUrlParams(DeliverySearchQuery)
      .addSuccess(DeliveryList)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "Search deliveries",
          "Deliveries of every webhook of the organization (an instance token: of its instance), newest first, with their " +
            "attempts; filter by `status`, `webhook_id`, `instance_id`, `since`, `until`; page with `page` or the cursors."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("retry", "/api/webhooks/:id/deliveries/:deliveryId/retry")
      .setPath(Schema.Struct({ id: IdString, deliveryId: IdString }))
      .addSuccess(Delivery)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .pipe(
        accepts(apiTokens),
        documented("Retry a delivery", "Queues a finished (dead, failed or succeeded) delivery again, at once.")
      )
  )
  .add(
    HttpApiEndpoint.post("recover", "/api/webhooks/:id/recover")
      .setPath(WebhookPath)
      .setPayload(RecoverRequest)
      .addSuccess(Recovered)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Recover failed deliveries",
          `Queues again every failed or dead delivery of the webhook created in [since, until), oldest first, at most ${RECOVER_MAX} a call, ` +
            "each with its original webhook-id. A repeat queues only what failed again since: what is queued is not queued twice.",
          { example: { since: "2026-11-20T00:00:00Z" } }
        )
      )
  )
  .add(
    HttpApiEndpoint.post("test", "/api/webhooks/:id/test")
      .setPath(WebhookPath)
      .setHeaders(TestHeaders)
      .addSuccess(Delivery)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.TooManyRequests)
      .pipe(
        accepts(apiTokens),
        documented(
          "Send a test event",
          "Sends a signed test event (`{\"object\":\"hub.test\",\"entry\":[{\"id\":<instance id>,\"time\":<unix seconds>,\"changes\":[{\"field\":\"hub.test\",\"value\":{…}}]}]}`) " +
            "through the normal delivery path, whatever kinds the webhook takes, and answers its delivery once the first attempt is logged " +
            "(or, after the webhook timeout, as it stands). At most one test per webhook a second (429 with Retry-After)."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("rotateSecret", "/api/webhooks/:id/rotate-secret")
      .setPath(WebhookPath)
      .addSuccess(SecretRotated)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "Rotate a webhook's signing secret",
          "Returns the new secret (shown only now); deliveries carry signatures of both secrets until the old one expires."
        )
      )
  )
  .middleware(Authentication)
{}

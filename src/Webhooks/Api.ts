/**
 * Webhooks of an instance (organization tokens for their instances, instance tokens for their own):
 * the spec's create / update / delete, plus list, read, event filters, custom headers, health, the
 * delivery log (per webhook and organization-wide), replay, recover, test events and secret rotation.
 * What they answer is declared here; what they take is Requests.ts.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { PageFields } from "../Domain/Paging.js"
import { IsoTimestamp } from "../Domain/Schemas.js"
import { disabledReasons, webhookKinds } from "../Domain/Vocabulary.js"
import {
  CreateWebhook,
  DeliveriesQuery,
  DeliveryPath,
  DeliverySearchQuery,
  DeliveryStatus,
  ListWebhooksQuery,
  Ordering,
  RecoverRequest,
  TestHeaders,
  UpdateWebhook,
  WebhookPath
} from "./Requests.js"

const Count = Schema.Number.annotations({ description: "A count" })

export const WebhookRecord = Schema.Struct({
  id: Schema.String,
  instance_id: Schema.String,
  url: Schema.String.annotations({ description: "Where its events are POSTed; empty for a poll webhook" }),
  kind: Schema.Literal(...webhookKinds).annotations({
    description: "push: its events are POSTed to url; poll: they wait in the hub for GET /api/webhooks/{id}/poll"
  }),
  name: Schema.String,
  active: Schema.Boolean,
  events: Schema.Array(Schema.String).annotations({ description: "The kinds of change it receives; [\"*\"] for all" }),
  headers: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
    description: "Its custom headers; values of headers named like secrets are shown as \"[redacted]\""
  }),
  ordering: Ordering,
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
    held: Count.annotations({
      description: "Deliveries held behind an earlier one about the same person (ordering per_contact)"
    }),
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
    description:
      "When it is due; a pending delivery is due from its creation, unless held behind an earlier one about the same person (ordering per_contact): then null"
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
      .setUrlParams(ListWebhooksQuery)
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
      .setPath(DeliveryPath)
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

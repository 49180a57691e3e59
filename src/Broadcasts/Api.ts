/**
 * Broadcasts (issue 32): one approved template to many people, each a bulk queued send paced like every
 * queued send (SendQueue/), with counts by status and by failure reason. Organization tokens name the
 * instance (`phone_number_id` or `instance_id`); instance tokens send from their own.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { IsoTimestamp, RequestStruct, WholeNumberText } from "../Domain/Schemas.js"
import { BusinessScopedUserId } from "../Domain/UserIds.js"
import { failureReasons, messageStatuses } from "../Domain/Vocabulary.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"
import { Component, Template } from "../Messages/Template.js"

/** Recipients one call may add. */
const RECIPIENTS_PER_CALL = 1_000
/** Recipients one broadcast may hold. */
export const RECIPIENTS_PER_BROADCAST = 100_000

const NUMBER_RULE = "must be the recipient's number in E.164 form: 5 to 20 digits, a leading + allowed"

/** One person: a number or a business-scoped user id, with the template parameters of their own. */
const Recipient = Schema.Struct({
  to: Schema.optional(
    Schema.String.pipe(Schema.pattern(/^\+?\d{5,20}$/, { message: () => NUMBER_RULE }))
  ),
  recipient: Schema.optional(BusinessScopedUserId),
  components: Schema.optional(Schema.Array(Component)).annotations({
    description: "This person's template components (their parameters), instead of the broadcast's"
  })
}).pipe(
  Schema.filter((r) =>
    (r.to === undefined) === (r.recipient === undefined)
      ? { path: ["to"], message: "give exactly one of to (a number) and recipient (a business-scoped user id)" }
      : undefined
  )
)

const Recipients = Schema.Array(Recipient).pipe(
  Schema.minItems(1, { message: () => "must hold at least one recipient" }),
  Schema.maxItems(RECIPIENTS_PER_CALL, { message: () => `must hold at most ${RECIPIENTS_PER_CALL} recipients a call` })
)

export const NewBroadcast = RequestStruct({
  name: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(200, { message: () => "must be at most 200 characters" })
  ),
  template: Template,
  recipients: Recipients,
  send_at: Schema.optional(
    Schema.String.pipe(Schema.filter((text) => !Number.isNaN(Date.parse(text)) || "must be an ISO 8601 date and time"))
  ).annotations({ description: "When its sends may go (ISO 8601, up to 35 days ahead); now when absent" }),
  validity: Schema.optional(
    Schema.Int.pipe(
      Schema.between(1, 36_000, { message: () => "must be a whole number of seconds from 1 to 36000" })
    )
  ).annotations({ description: "Seconds each send may wait for its turn; default HUB_QUEUE_VALIDITY" }),
  ...instanceSelectorFields
})

export const MoreRecipients = RequestStruct({ recipients: Recipients })

export const BroadcastRecord = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  instance_id: Schema.String,
  status: Schema.Literal("scheduled", "sending", "completed", "cancelled").annotations({
    description:
      "scheduled (send_at not reached), sending (sends wait in the queue or go), completed (none waits: each was made or given up), cancelled"
  }),
  template: Template,
  send_at: Schema.NullOr(IsoTimestamp),
  validity: Schema.NullOr(Schema.Number),
  created_at: IsoTimestamp,
  cancelled_at: Schema.NullOr(IsoTimestamp),
  counts: Schema.Struct({
    recipients: Schema.Number,
    pending: Schema.Number,
    sent: Schema.Number,
    delivered: Schema.Number,
    read: Schema.Number,
    failed: Schema.Number,
    skipped: Schema.Number
  }).annotations({ description: "Recipients by their send's status; `skipped`: no send was made (see failures)" }),
  failures: Schema.Record({ key: Schema.String, value: Schema.Number }).annotations({
    description: "Failed and skipped recipients by reason: expired, cancelled, refused, outcome_unknown, " +
      "opted_out (skipped: they stopped the business's marketing messages), failed (Meta's failed status)"
  })
}).annotations({ identifier: "Broadcast" })

const BroadcastList = Schema.Struct({
  data: Schema.Array(BroadcastRecord),
  next: Schema.NullOr(Schema.String).annotations({ description: "The `after` of the next page; null at the end" })
})

const RecipientsAdded = Schema.Struct({
  added: Schema.Number.annotations({ description: "New recipients queued" }),
  skipped: Schema.Number.annotations({ description: "New recipients not sent to: they opted out of marketing" }),
  duplicates: Schema.Number.annotations({ description: "Recipients already in the broadcast (sent once)" }),
  recipients: Schema.Number.annotations({ description: "The broadcast's recipients now" })
})

const RecipientStatus = Schema.Literal(...messageStatuses, "skipped")

const RecipientRecord = Schema.Struct({
  to: Schema.String.annotations({ description: "The number or business-scoped user id" }),
  message_id: Schema.NullOr(Schema.String).annotations({ description: "Its send's message record (null: skipped)" }),
  status: RecipientStatus,
  failure_reason: Schema.NullOr(Schema.Literal(...failureReasons, "opted_out", "failed"))
})

const RecipientPage = Schema.Struct({
  data: Schema.Array(RecipientRecord),
  next: Schema.NullOr(Schema.String).annotations({ description: "The `after` of the next page; null at the end" })
})

export const RecipientQuery = RequestStruct({
  status: Schema.optional(RecipientStatus),
  limit: Schema.optionalWith(WholeNumberText(1, 1000), { default: () => 100 }),
  after: Schema.optional(Schema.String.pipe(Schema.pattern(/^\d{1,9}$/, { message: () => "must be a cursor" })))
})

export const BroadcastQuery = RequestStruct({
  limit: Schema.optionalWith(WholeNumberText(1, 100), { default: () => 20 }),
  after: Schema.optional(Schema.String.pipe(Schema.pattern(/^bc_[\w-]{1,64}$/, { message: () => "must be a cursor" })))
})

const BroadcastPath = Schema.Struct({ broadcastId: Schema.String })

/** A broadcast of an approved template to two people, one with their own parameter (works with an instance token). */
const NEW_BROADCAST_EXAMPLE = {
  name: "Spring sale",
  template: {
    name: "spring_sale",
    language: { code: "en_US" },
    components: [{ type: "body", parameters: [{ type: "text", text: "friend" }] }]
  },
  recipients: [
    { to: "15551230001", components: [{ type: "body", parameters: [{ type: "text", text: "Ana" }] }] },
    { to: "15551230002" }
  ]
}

export class BroadcastsApi extends HttpApiGroup.make("broadcasts")
  .annotate(OpenApi.Description, "Broadcasts: one template to many people, paced as bulk queued sends.")
  .add(
    HttpApiEndpoint.post("create", "/api/broadcasts")
      .setPayload(NewBroadcast)
      .addSuccess(BroadcastRecord, { status: 201 })
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(UpstreamErrors)
      .addError(Wire.ServiceUnavailable)
      .pipe(
        accepts(apiTokens),
        documented(
          "Create a broadcast",
          `Queues one bulk send of the template to each recipient (up to ${RECIPIENTS_PER_CALL} a call; more with ` +
            `POST /api/broadcasts/{id}/recipients, up to ${RECIPIENTS_PER_BROADCAST}), each with its own components when ` +
            "given. The same person twice is sent once; people who stopped the business's marketing messages are " +
            "skipped (opted_out). The template must be APPROVED (asked of the Graph once, here: 400 template_not_found or " +
            "template_not_approved otherwise). A MARKETING template goes through the Marketing Messages API where the " +
            "instance has it on.",
          { example: NEW_BROADCAST_EXAMPLE }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/api/broadcasts")
      .setUrlParams(BroadcastQuery)
      .addSuccess(BroadcastList)
      .pipe(
        accepts(apiTokens),
        documented(
          "List broadcasts",
          "The organization's broadcasts (an instance's own for an instance token), newest first, `limit` a page " +
            "(20 unless said, at most 100); `after` is the `next` of the page before."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("get", "/api/broadcasts/:broadcastId")
      .setPath(BroadcastPath)
      .addSuccess(BroadcastRecord)
      .addError(Wire.NotFound)
      .pipe(accepts(apiTokens), documented("A broadcast", "Its status, counts by status and failures by reason."))
  )
  .add(
    HttpApiEndpoint.post("addRecipients", "/api/broadcasts/:broadcastId/recipients")
      .setPath(BroadcastPath)
      .setPayload(MoreRecipients)
      .addSuccess(RecipientsAdded)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.TooManyRequests)
      .addError(Wire.ServiceUnavailable)
      .pipe(
        accepts(apiTokens),
        documented(
          "Add recipients",
          `Queues the broadcast's template to more people (up to ${RECIPIENTS_PER_CALL} a call, ${RECIPIENTS_PER_BROADCAST} in all); ` +
            "409 once the broadcast is cancelled.",
          { example: { recipients: [{ to: "15551230003" }] } }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("recipients", "/api/broadcasts/:broadcastId/recipients")
      .setPath(BroadcastPath)
      .setUrlParams(RecipientQuery)
      .addSuccess(RecipientPage)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "List recipients",
          "The broadcast's recipients as added, with their send's status; `status` filters."
        )
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/api/broadcasts/:broadcastId/cancel")
      .setPath(BroadcastPath)
      .addSuccess(BroadcastRecord)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "Cancel a broadcast",
          "Takes its sends that have not begun off the queue (their records end failed, cancelled); sends already made stay."
        )
      )
  )
  .middleware(Authentication)
{}

/**
 * The overview's time series (issue 32): per minute over the last hours, sends by status, webhook
 * delivery attempts by outcome and the send queue's depth, for an organization (all of its instances,
 * or the one it names) or an instance token's own instance.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { IsoTimestamp, RequestStruct, WholeNumberText } from "../Domain/Schemas.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"

/** The longest window one call reads. */
const MAX_HOURS = 24

export const TimeseriesQuery = RequestStruct({
  hours: Schema.optionalWith(WholeNumberText(1, MAX_HOURS), { default: () => 1 }).annotations({
    description: `The window: the last 1 to ${MAX_HOURS} hours (default 1), ending with the current minute`
  }),
  ...instanceSelectorFields
})

const SendCounts = Schema.Struct({
  pending: Schema.Number,
  sent: Schema.Number,
  delivered: Schema.Number,
  read: Schema.Number,
  failed: Schema.Number
}).annotations({
  identifier: "SendCounts",
  description: "Outbound messages accepted in the minute (sent at once or queued), by their status now"
})

const AttemptCounts = Schema.Struct({
  succeeded: Schema.Number,
  failed: Schema.Number,
  dead: Schema.Number
}).annotations({
  identifier: "AttemptCounts",
  description: "Webhook delivery attempts begun in the minute, by outcome: succeeded (a 2xx), failed (a retry " +
    "follows or followed), dead (the last attempt of a delivery given up)"
})

const MinuteBucket = Schema.Struct({
  minute: IsoTimestamp.annotations({ description: "The minute's start" }),
  sends: SendCounts,
  deliveries: AttemptCounts,
  queue_depth: Schema.Number.annotations({
    description: "Sends waiting in the send queue as sampled in the minute (0: empty, or no sample was taken); " +
      "the current minute's is the queue now"
  })
}).annotations({ identifier: "MinuteBucket" })

export const Timeseries = Schema.Struct({
  hours: Schema.Number,
  instance_id: Schema.NullOr(Schema.String).annotations({
    description: "The instance counted; null: every instance of the organization"
  }),
  from: IsoTimestamp.annotations({ description: "The first minute's start" }),
  to: IsoTimestamp.annotations({ description: "The end of the last (current) minute, exclusive" }),
  minutes: Schema.Array(MinuteBucket).annotations({
    description: "Every minute of the window, oldest first, minutes with nothing in them as zeros"
  })
}).annotations({ identifier: "Timeseries" })

export class StatsApi extends HttpApiGroup.make("stats")
  .annotate(OpenApi.Description, "Per-minute counts over the last hours: what the dashboard's overview draws.")
  .add(
    HttpApiEndpoint.get("timeseries", "/api/stats/timeseries")
      .setUrlParams(TimeseriesQuery)
      .addSuccess(Timeseries)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .pipe(
        accepts(apiTokens),
        documented(
          "Sends, deliveries and queue depth per minute",
          `Every minute of the last \`hours\` (1 to ${MAX_HOURS}): outbound messages by the minute they were accepted and ` +
            "their status now, webhook delivery attempts by the minute they began and their outcome, and the send " +
            "queue's depth as sampled once a minute (the current minute: as it is now). An organization token counts all of its instances unless it names " +
            "one (`instance_id` or `phone_number_id`); an instance token counts its own."
        )
      )
  )
  .middleware(Authentication)
{}

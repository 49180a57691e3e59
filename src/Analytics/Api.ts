/**
 * Analytics: the business account's activities and the number's compliance info, passed through.
 * Business account data: organization tokens may read it by naming the instance.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { UpstreamErrors, Wire } from "../Domain/Errors.js"
import { GraphList, GraphPagingFields, JsonObjectSchema, PassThrough } from "../Domain/Json.js"
import { RequestStruct } from "../Domain/Schemas.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"

const UNIX_SECONDS = /^\d{1,12}$/
const ISO_8601 = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/

/** Milliseconds since the epoch of a Unix-seconds or ISO 8601 time; NaN when it is neither. */
const timeOf = (value: string): number =>
  UNIX_SECONDS.test(value) ? Number(value) * 1000 : ISO_8601.test(value) ? Date.parse(value) : Number.NaN

const Time = Schema.String.pipe(Schema.filter((value) => !Number.isNaN(timeOf(value)), {
  message: () => "must be a Unix timestamp in seconds or an ISO 8601 time such as 2025-10-14T16:45:00Z"
}))

const ActivitiesQuery = RequestStruct({
  ...instanceSelectorFields,
  since: Schema.optional(Time),
  until: Schema.optional(Time),
  ...GraphPagingFields,
  type: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Z_]+(,[A-Z_]+)*$/, {
    message: () => "must be activity types such as TEMPLATE_CREATED, comma separated"
  })))
}).pipe(
  Schema.filter((query) =>
    query.since !== undefined && query.until !== undefined && timeOf(query.since) > timeOf(query.until)
      ? { path: ["until"], message: "must not be before since" }
      : undefined
  ),
  Schema.annotations({ parseOptions: { errors: "all" } })
)

const ComplianceQuery = RequestStruct({ ...instanceSelectorFields })

/** The spec's activity fields; whichever `fields` asked for come back, so none is required. */
export const Activity = PassThrough({
  id: Schema.optional(Schema.String),
  activity_type: Schema.optional(Schema.String),
  timestamp: Schema.optional(Schema.String),
  details: Schema.optional(JsonObjectSchema)
})

export class AnalyticsApi extends HttpApiGroup.make("analytics")
  .annotate(
    OpenApi.Description,
    "The business account's activities and the phone number's compliance info, passed through from the upstream."
  )
  .add(
    HttpApiEndpoint.get("activities", "/api/analytics/activities")
      .setUrlParams(ActivitiesQuery)
      .addSuccess(GraphList(Activity))
      .pipe(
        accepts(apiTokens),
        documented(
          "List business account activities",
          "The upstream's activity log of the instance's business account, passed through with its paging cursors " +
            "(`after`, `before`); filter by time (`since`, `until`) and `type`. An organization token names the instance " +
            "with `instance_id` or `phone_number_id`."
        )
      )
  )
  .add(
    HttpApiEndpoint.get("compliance", "/api/analytics/compliance")
      .setUrlParams(ComplianceQuery)
      .addSuccess(GraphList(JsonObjectSchema))
      .pipe(
        accepts(apiTokens),
        documented(
          "Read compliance info",
          "The phone number's compliance info from the upstream, passed through. An organization token names the instance " +
            "with `instance_id` or `phone_number_id`."
        )
      )
  )
  .addError(Wire.Forbidden)
  .addError(Wire.NotFound)
  .addError(UpstreamErrors)
  .middleware(Authentication)
{}

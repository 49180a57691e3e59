/**
 * The pull endpoint (issue 33): a poll webhook's events, read in order from a cursor, long-polled.
 * What it takes and answers is declared here; the steps are Poll.ts.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { Cursor } from "../Domain/Paging.js"
import { IsoTimestamp, RequestStruct } from "../Domain/Schemas.js"
import { Instant, WebhookPath } from "../Webhooks/Requests.js"

/** The longest a poll waits for an event (the server's idle timeout covers it: Edge/FastLane.ts). */
export const MAX_POLL_WAIT_SECONDS = 30

const MAX_POLL_LIMIT = 500

const wholeNumber = (min: number, max: number) =>
  Schema.NumberFromString.pipe(
    Schema.int({ message: () => "must be a whole number" }),
    Schema.between(min, max, { message: () => `must be from ${min} to ${max}` })
  )

export const PollQuery = RequestStruct({
  cursor: Schema.optional(
    Cursor.annotations({
      message: () => "must be the next_cursor of an earlier poll's answer",
      description: "The `next_cursor` of the previous answer: the events after it"
    })
  ),
  since: Schema.optional(Instant).annotations({
    description: "Without a cursor: the events received from this time on (at most HUB_RETENTION back); " +
      "without either, those received since the webhook was created"
  }),
  limit: Schema.optionalWith(wholeNumber(1, MAX_POLL_LIMIT), { default: () => 100 }).annotations({
    description: `Events per answer, at most ${MAX_POLL_LIMIT} (default 100)`
  }),
  wait: Schema.optionalWith(wholeNumber(0, MAX_POLL_WAIT_SECONDS), { default: () => 0 }).annotations({
    description:
      `Seconds to wait for an event when none is there yet, at most ${MAX_POLL_WAIT_SECONDS} (default 0: answer at once)`
  })
})

const PolledEvent = Schema.Struct({
  event_id: Schema.String,
  received_at: IsoTimestamp,
  headers: Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
    description:
      "The headers a push of it would carry: webhook-id (the same on every poll of it), webhook-timestamp, " +
      "webhook-signature (Standard Webhooks, signed with the webhook's secret over `body`), content-type and its custom headers"
  }),
  body: Schema.String.annotations({
    description:
      "The envelope a push would POST, as the exact JSON text signed: verify the signature over this text, then parse it"
  })
})

export const PollAnswer = Schema.Struct({
  data: Schema.Array(PolledEvent).annotations({ description: "In the order they arrived" }),
  next_cursor: Schema.NullOr(Schema.String).annotations({
    description: "Pass as `cursor` for the events after these (also when none came: it moves past events the " +
      "webhook does not take); null only when nothing was read yet: call again as before"
  }),
  more: Schema.Boolean.annotations({
    description:
      "True when the answer stopped at `limit` (or at 5,000 events read past): more may wait, call again at once"
  })
})

export class PollApi extends HttpApiGroup.make("poll")
  .annotate(OpenApi.Description, "Pull: a poll webhook's events, read in order with a cursor instead of pushed.")
  .add(
    HttpApiEndpoint.get("poll", "/api/webhooks/:id/poll")
      .setPath(WebhookPath)
      .setUrlParams(PollQuery)
      .addSuccess(PollAnswer)
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .pipe(
        accepts(apiTokens),
        documented(
          "Poll a webhook's events",
          "For a webhook created with `\"kind\": \"poll\"`: its instance's events it takes (its `events` filter), " +
            "oldest first after `cursor`, each with the body and signature headers a push would carry, so it is " +
            `verified the same way. With \`wait\` (seconds, at most ${MAX_POLL_WAIT_SECONDS}) and nothing new, the answer ` +
            "waits for an event. Events stay for HUB_RETENTION; any replica answers. 409 `push_webhook` for a webhook " +
            "that is pushed to, `webhook_inactive` for an inactive one."
        )
      )
  )
  .middleware(Authentication)
{}

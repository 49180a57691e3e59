/**
 * Replays (issue 33): a webhook's stored events of a window delivered to it again, and the progress
 * of each replay. What they take and answer is declared here; the steps are Replays.ts.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { Cursor } from "../Domain/Paging.js"
import { IdString, IsoTimestamp, RequestStruct } from "../Domain/Schemas.js"
import { EventFilter, IdempotencyKey, Instant, WebhookPath } from "../Webhooks/Requests.js"

/** A cursor a replay answered: where the next call goes on. */
const ReplayCursor = Cursor.annotations({
  message: () => "must be the next_cursor of an earlier replay's answer",
  description: "The `next_cursor` of an earlier replay's answer: this call goes on after the events it walked"
})

export const ReplayRequest = RequestStruct({
  since: Instant.annotations({ description: "Replay the events received at or after this (within HUB_RETENTION)" }),
  until: Schema.optional(Instant).annotations({ description: "…and before this (default: now)" }),
  events: Schema.optional(EventFilter).annotations({
    description: "Only these kinds (of those the webhook takes); absent or [\"*\"] for all it takes"
  }),
  cursor: Schema.optional(ReplayCursor)
})

export const ReplayHeaders = RequestStruct({
  "idempotency-key": Schema.optional(IdempotencyKey).annotations({
    description:
      "Repeating a replay with the same key within 24 hours answers the first one (as it stands) instead of replaying again"
  })
})

const ReplayPath = Schema.Struct({ id: IdString, replayId: IdString })

const Count = Schema.Number.annotations({ description: "A count" })

export const Replay = Schema.Struct({
  id: Schema.String,
  webhook_id: Schema.String,
  since: IsoTimestamp,
  until: IsoTimestamp,
  events: Schema.Array(Schema.String).annotations({
    description: "The kinds replayed; [\"*\"] for all the webhook takes"
  }),
  queued: Count.annotations({
    description: "Deliveries this replay queued: new ones, and earlier ones sent again with their webhook-id"
  }),
  already_queued: Count.annotations({ description: "Events whose delivery to the webhook was queued already" }),
  deliveries: Schema.Struct({
    queued: Count.annotations({ description: "Waiting for an attempt (or a retry)" }),
    delivered: Count,
    failed: Count.annotations({ description: "Given up (dead) or cancelled" })
  }).annotations({
    description: "Its deliveries by outcome now (one a later replay queued again counts in that one)"
  }),
  next_cursor: Schema.NullOr(Schema.String).annotations({
    description: "Pass as `cursor` (with the same since, until and events) to replay the events after the " +
      "HUB_REPLAY_MAX this call walked; null when the window is through"
  }),
  finished_at: Schema.NullOr(IsoTimestamp).annotations({ description: "When it had queued all; null while it runs" }),
  created_at: IsoTimestamp
})

export class ReplaysApi extends HttpApiGroup.make("replays")
  .annotate(OpenApi.Description, "Replays: a webhook's stored events of a time window, delivered to it again.")
  .add(
    HttpApiEndpoint.post("replay", "/api/webhooks/:id/replay")
      .setPath(WebhookPath)
      .setPayload(ReplayRequest)
      .setHeaders(ReplayHeaders)
      .addSuccess(Replay, { status: 201 })
      .addError(Wire.NotFound)
      .addError(Wire.Conflict)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(apiTokens),
        documented(
          "Replay events",
          "Delivers to the webhook every stored event of its instance received in [since, until) that it takes (narrowed " +
            "by `events`), oldest first: delivered before, failed, or received before the webhook existed. An event delivered " +
            "to it before is sent again with its original webhook-id (receivers dedupe it); any other gets a delivery of its " +
            "own. The window must lie within HUB_RETENTION; a call walks at most HUB_REPLAY_MAX events (default 100,000) " +
            "and answers `next_cursor` to go on. Replayed deliveries wait behind first attempts of live events (the " +
            "dispatcher's retry lane), so live traffic never waits for them. Follow them with GET …/replays/{replayId}. " +
            "409 `webhook_inactive` for an inactive webhook, `poll_webhook` for a poll webhook (read its past events " +
            "with its poll cursor instead).",
          { example: { since: "2026-11-20T00:00:00Z", events: ["messages"] } }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("replayProgress", "/api/webhooks/:id/replays/:replayId")
      .setPath(ReplayPath)
      .addSuccess(Replay)
      .addError(Wire.NotFound)
      .pipe(accepts(apiTokens), documented("Read a replay", "Its window and its deliveries by outcome now."))
  )
  .middleware(Authentication)
{}

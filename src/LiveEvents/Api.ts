/** Live events: the upstream changes routed to the caller's instances, streamed as they commit (server-sent events). */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { RequestStruct } from "../Domain/Schemas.js"
import { instanceSelectorFields } from "../Instances/RequestTarget.js"

const EventStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  description:
    "Server-sent events. First `event: ready` once subscribed; then one unnamed event (`message`) per committed " +
    "upstream event of an instance, its `id:` the event id and its data `{id, instance_id, received_at, payload}`, the " +
    "payload being the envelope the instance's webhooks receive; `event: dropped` with `{dropped, message}` when this " +
    "client read too slowly and lost events; a comment line every few seconds keeps the connection open, or, " +
    "while any of the caller's send queues is busy (and once more when it falls quiet), `event: queue` with " +
    "`{data}`, the queues as GET /api/send-queues answers them."
})

export class LiveEventsApi extends HttpApiGroup.make("liveEvents")
  .annotate(OpenApi.Description, "The changes the hub receives for the caller's instances, live.")
  .add(
    HttpApiEndpoint.get("stream", "/api/events/stream")
      .setUrlParams(RequestStruct(instanceSelectorFields))
      .addSuccess(EventStream)
      .addError(Wire.Forbidden)
      .addError(Wire.NotFound)
      .addError(Wire.TooManyRequests)
      .pipe(
        accepts(apiTokens),
        documented(
          "Stream live events",
          "The upstream changes committed for the caller's instances, as server-sent events. Organization tokens see every " +
            "instance of the organization (or the one named by instance_id or phone_number_id); instance tokens their own. " +
            "Nothing is replayed: a stream sees what commits while it is open. A stream ends when its token is revoked or " +
            "its session expires or is revoked (on every replica, within about a second). At most HUB_STREAMS_PER_TOKEN streams " +
            "per token and HUB_STREAMS_PER_ORGANIZATION per organization are open at once; beyond them 429."
        )
      )
  )
  .middleware(Authentication)
{}

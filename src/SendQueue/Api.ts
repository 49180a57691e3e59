/** The send queues: each number's queued sends, how long the oldest has waited, and its pace (organization or instance tokens). */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, apiTokens } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"

const NumberQueue = Schema.Struct({
  instance_id: Schema.String,
  phone_number_id: Schema.String,
  depth: Schema.Number.annotations({ description: "Queued sends (waiting, held or being sent)" }),
  oldest_wait_seconds: Schema.Number.annotations({
    description: "How long the oldest send whose time has come has waited (0 when none waits)"
  }),
  send_rate: Schema.Number.annotations({ description: "The number's pace: its live level, under HUB_SEND_RATE" }),
  sends_per_second: Schema.Number.annotations({
    description: "Queued sends the number made a second over the last 10 seconds, across every replica"
  })
}).annotations({ identifier: "NumberQueue" })

export class SendQueueApi extends HttpApiGroup.make("sendQueue")
  .annotate(OpenApi.Description, "The send queues of queued sends and broadcasts, per number.")
  .add(
    HttpApiEndpoint.get("list", "/api/send-queues")
      .addSuccess(Schema.Struct({ data: Schema.Array(NumberQueue) }))
      .pipe(
        accepts(apiTokens),
        documented(
          "The send queues",
          "Each of the organization's numbers (an instance token: its own) with its queued sends, the oldest wait and its pace."
        )
      )
  )
  .middleware(Authentication)
{}

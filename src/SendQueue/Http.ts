/** The send queues' handler: each visible instance's number, with its queue as the database holds it. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { SendQueues } from "./Queues.js"

export const SendQueueHttpLive = HttpApiBuilder.group(HubApi, "sendQueue", (handlers) =>
  Effect.gen(function*() {
    const queues = yield* SendQueues
    return handlers.handle("list", () =>
      Effect.flatMap(CurrentPrincipal, (principal) =>
        Effect.map(queues.visible(principal.organizationId, principal.instance?.id), (data) => ({ data }))))
  }))

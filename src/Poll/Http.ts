/** The poll group's handler: the webhook checked (a poll webhook of the caller's, active), the read in Poll.ts. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer } from "effect"
import { HubApi } from "../Api.js"
import { Conflict } from "../Domain/Errors.js"
import { findOwn, inactive, notFound } from "../Webhooks/Http.js"
import { WebhooksRepo } from "../Webhooks/Repo.js"
import type { PollQuery } from "./Api.js"
import { Poll } from "./Poll.js"

const pollEvents = (id: string, query: typeof PollQuery.Type) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    if (webhook.kind !== "poll") {
      return yield* new Conflict({
        message:
          `webhook ${webhook.id} pushes its events to its url; only a webhook created with "kind": "poll" is polled`,
        error: "push_webhook"
      })
    }
    if (!webhook.active) return yield* inactive(webhook.id, "polling it")
    const signing = yield* Effect.flatMap(WebhooksRepo, (repo) => repo.signing(webhook.id))
    if (signing === undefined) return yield* notFound(id)
    const poll = yield* Poll
    return yield* poll.poll(webhook, signing, {
      after: query.cursor,
      since: query.since,
      limit: query.limit,
      waitMs: query.wait * 1000
    })
  })

export const PollHttpLive = HttpApiBuilder.group(
  HubApi,
  "poll",
  (handlers) => handlers.handle("poll", ({ path, urlParams }) => pollEvents(path.id, urlParams))
).pipe(Layer.provide(Poll.Default))

import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { hourOf } from "../Delivery/AttemptLog.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { generateWebhookSecret } from "../Delivery/Signing.js"
import { BadRequest, Conflict, NotFound, TooManyRequests } from "../Domain/Errors.js"
import { ALL_KINDS } from "../Domain/EventKinds.js"
import { nowIso } from "../Domain/Ids.js"
import { cursorsOf, encodeCursor, type PageRequest, pageRequest } from "../Domain/Paging.js"
import { CurrentPrincipal, type Principal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { UrlPolicy } from "../Net/UrlPolicy.js"
import { RECOVER_MAX } from "./Api.js"
import { REDACTED, shownHeaders } from "./CustomHeaders.js"
import { type DeliveryHealth, WebhookDeliveries } from "./Deliveries.js"
import type { AttemptRow, DeliveryRow, LogPage } from "./DeliveryLog.js"
import { type WebhookRow, type WebhookScope, WebhooksRepo } from "./Repo.js"
import { makeTestEvents } from "./TestEvents.js"

/** How long a rotated-out secret keeps signing, so receivers can switch without missing events. */
const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000

const NO_DELIVERIES: DeliveryHealth = {
  succeeded: 0,
  failed: 0,
  dead: 0,
  lastSuccessAt: null,
  pending: 0,
  retrying: 0,
  queuedCapped: false
}

/** The first of the 24 hourly buckets the health counts: the current hour and the 23 before it. */
const healthSince = () => hourOf(new Date(Date.now() - 23 * 3600_000).toISOString())

const record = (row: WebhookRow, health: DeliveryHealth) => ({
  id: row.id,
  instance_id: row.instance_id,
  url: row.url,
  name: row.name,
  active: row.active,
  events: row.events ?? [ALL_KINDS],
  headers: shownHeaders(row.headers),
  disabled_reason: row.disabled_reason,
  failing_since: row.failing_since,
  last_success_at: health.lastSuccessAt,
  deliveries_24h: { succeeded: health.succeeded, failed: health.failed, dead: health.dead },
  queued: { pending: health.pending, failed: health.retrying, ...(health.queuedCapped ? { capped: true } : {}) },
  created_at: row.created_at,
  updated_at: row.updated_at
})

const delivery = (row: DeliveryRow, attempts: ReadonlyArray<AttemptRow>) => ({
  id: row.id,
  webhook_id: row.webhook_id,
  event_id: row.event_id,
  message_id: row.message_id,
  status: row.status,
  attempts: row.attempts,
  next_attempt_at: row.next_attempt_at,
  last_status_code: row.last_status_code,
  last_error: row.last_error,
  created_at: row.created_at,
  updated_at: row.updated_at,
  attempt_log: attempts.filter((a) => a.delivery_id === row.id).map((a) => ({
    attempt: a.attempt,
    started_at: a.started_at,
    status_code: a.status_code,
    latency_ms: a.latency_ms,
    error: a.error,
    response_snippet: a.response_snippet
  }))
})

/** A page of the delivery log as answered: the spec's envelope, the cap flag and the cursors. */
const deliveryList = (listed: LogPage, query: { readonly page: number; readonly limit: number }, page: PageRequest) => {
  const cursors = cursorsOf(listed.rows, listed.more, page)
  return {
    data: listed.rows.map((row) => delivery(row, listed.attempts)),
    total: listed.total,
    page: query.page,
    limit: query.limit,
    ...(listed.totalCapped ? { total_capped: true } : {}),
    // A page after a cursor that examined a window and found nothing goes on from where it stopped.
    cursors: listed.examinedTo === undefined ? cursors : { ...cursors, after: encodeCursor(listed.examinedTo) }
  }
}

const scopeOf = (principal: Principal): WebhookScope => ({
  organizationId: principal.organizationId,
  instanceId: principal.instance?.id
})

const notFound = (id: string) => new NotFound({ message: `webhook ${id} was not found`, error: "not_found" })

const inactive = (id: string, action: string) =>
  new Conflict({
    message: `webhook ${id} is not active; activate it (PATCH active: true) before ${action}`,
    error: "webhook_inactive"
  })

/** `until` must come after `since`. */
const checkWindow = (since: string | undefined, until: string | undefined) =>
  since !== undefined && until !== undefined && until <= since
    ? Effect.fail(
      new BadRequest({
        message: "Invalid request: until: must be after since",
        error: "validation_failed",
        details: [{ field: "until", message: "must be after since" }]
      })
    )
    : Effect.void

export const WebhooksHttpLive = HttpApiBuilder.group(HubApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const repo = yield* WebhooksRepo
    const deliveries = yield* WebhookDeliveries
    const access = yield* InstanceAccess
    const policy = yield* UrlPolicy
    const signal = yield* DispatchSignal
    const tests = yield* makeTestEvents

    const allowedUrl = (url: string) =>
      policy.check(url).pipe(
        Effect.mapError((refused) =>
          new BadRequest({
            message: `url is not allowed: ${refused.message}`,
            error: "url_not_allowed",
            details: [{ field: "url", message: refused.message }]
          })
        )
      )

    const findOwn = (id: string) =>
      Effect.flatMap(CurrentPrincipal, (principal) => repo.find(scopeOf(principal), id)).pipe(
        Effect.flatMap(Option.match({ onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed }))
      )

    /** The records of these webhooks, with their health. */
    const withHealth = (rows: ReadonlyArray<WebhookRow>) =>
      Effect.map(deliveries.health(rows.map((row) => row.id), healthSince()), (health) =>
        rows.map((row) => record(row, health.get(row.id) ?? NO_DELIVERIES)))

    const recordOf = (row: WebhookRow) =>
      Effect.map(withHealth([row]), (records) =>
        records[0] ?? record(row, NO_DELIVERIES))

    /** A delivery of this webhook with its attempts, as it stands. */
    const deliveryOf = (webhookId: string, id: string) =>
      Effect.gen(function*() {
        const row = yield* deliveries.find(webhookId, id)
        if (row === undefined) {
          return yield* new NotFound({ message: `delivery ${id} was not found`, error: "not_found" })
        }
        return delivery(row, yield* deliveries.findAttempts(row.id))
      })

    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const instance = yield* access.resolve(principal, { instanceId: payload.instance_id })
          yield* allowedUrl(payload.url)
          const secret = generateWebhookSecret()
          const row = yield* repo.create({
            organizationId: principal.organizationId,
            instanceId: instance.id,
            name: payload.name,
            url: payload.url,
            secret,
            events: payload.events,
            headers: payload.headers,
            perInstance: config.webhooksPerInstance
          }).pipe(Effect.catchTag("WebhookLimitReached", ({ limit }) =>
            Effect.fail(
              new Conflict({
                message:
                  `instance ${instance.id} already has ${limit} webhooks, the most an instance may have (HUB_WEBHOOKS_PER_INSTANCE=${limit}); delete one first`,
                error: "webhook_limit_reached"
              })
            )))
          return { ...record(row, NO_DELIVERIES), secret }
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const instance = urlParams.instance_id === undefined
            ? undefined
            : yield* access.resolve(principal, { instanceId: urlParams.instance_id })
          const rows = yield* repo.list(scopeOf(principal), { instanceId: instance?.id, event: urlParams.event })
          return { data: yield* withHealth(rows) }
        }))
      .handle("get", ({ path }) => Effect.flatMap(findOwn(path.id), recordOf))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (payload.url !== undefined) yield* allowedUrl(payload.url)
          const row = yield* repo.update(scopeOf(principal), path.id, payload).pipe(
            Effect.catchTag("NoSecretToKeep", ({ names, originChanged }) => {
              const why = originChanged
                ? "the url moves to another origin, so no stored value is kept"
                : "no stored value to keep"
              return Effect.fail(
                new BadRequest({
                  message: `Invalid request: headers: ${names.join(", ")}: ${why}; give ${
                    names.length === 1 ? "its value" : "their values"
                  } instead of "${REDACTED}"`,
                  error: "validation_failed",
                  details: names.map((name) => ({
                    field: `headers.${name}`,
                    message: `${why}; give its value instead of "${REDACTED}"`
                  }))
                })
              )
            })
          )
          return yield* recordOf(
            yield* Option.match(row, { onNone: () => Effect.fail(notFound(path.id)), onSome: Effect.succeed })
          )
        }))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (!(yield* repo.remove(scopeOf(principal), path.id))) return yield* notFound(path.id)
        }))
      .handle("deliveries", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          yield* checkWindow(urlParams.since, urlParams.until)
          const page = yield* pageRequest(urlParams)
          const listed = yield* deliveries.list({
            webhookIds: [webhook.id],
            status: urlParams.status,
            since: urlParams.since,
            until: urlParams.until,
            page
          })
          return deliveryList(listed, urlParams, page)
        }))
      .handle("searchDeliveries", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          yield* checkWindow(urlParams.since, urlParams.until)
          const page = yield* pageRequest(urlParams)
          const instance = urlParams.instance_id === undefined
            ? undefined
            : yield* access.resolve(principal, { instanceId: urlParams.instance_id })
          // Deliveries are found through their webhooks: those the caller sees, narrowed by the filters.
          const webhookIds = urlParams.webhook_id === undefined
            ? (yield* repo.list(scopeOf(principal), { instanceId: instance?.id })).map((w) => w.id)
            : yield* Effect.map(
              findOwn(urlParams.webhook_id),
              (w) => (instance === undefined || w.instance_id === instance.id ? [w.id] : [])
            )
          const listed = yield* deliveries.list({
            webhookIds,
            status: urlParams.status,
            since: urlParams.since,
            until: urlParams.until,
            page
          })
          return deliveryList(listed, urlParams, page)
        }))
      .handle("retry", ({ path }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          if (!webhook.active) return yield* inactive(webhook.id, "re-sending")
          const outcome = yield* deliveries.replay(webhook.id, path.deliveryId, nowIso())
          if (outcome === "not_found") {
            return yield* new NotFound({ message: `delivery ${path.deliveryId} was not found`, error: "not_found" })
          }
          if (outcome === "already_queued") {
            return yield* new Conflict({
              message: `delivery ${path.deliveryId} is already queued`,
              error: "delivery_queued"
            })
          }
          // Read before waking the dispatcher, so the answer shows the delivery as queued.
          const answer = yield* deliveryOf(webhook.id, path.deliveryId)
          yield* signal.notify
          return answer
        }))
      .handle("recover", ({ path, payload }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          if (!webhook.active) return yield* inactive(webhook.id, "recovering its deliveries")
          const now = nowIso()
          const until = payload.until ?? now
          yield* checkWindow(payload.since, until)
          const outcome = yield* deliveries.recover(webhook.id, { since: payload.since, until }, now, RECOVER_MAX)
          if (outcome.requeued > 0) yield* signal.notify
          return { requeued: outcome.requeued, more: outcome.more, since: payload.since, until }
        }))
      .handle("test", ({ headers, path }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          if (!webhook.active) return yield* inactive(webhook.id, "testing it")
          const outcome = yield* tests.test(webhook, headers["idempotency-key"])
          switch (outcome._tag) {
            case "Repeat":
              yield* tests.awaitFirst(
                outcome.deliveryId,
                Effect.map(deliveries.findAttempts(outcome.deliveryId), (attempts) => attempts.length > 0)
              )
              return yield* deliveryOf(webhook.id, outcome.deliveryId)
            case "TooSoon":
              return yield* new TooManyRequests({
                message:
                  `webhook ${webhook.id} was tested less than a second ago; at most one test per webhook a second`,
                error: "rate_limited",
                retryAfterSeconds: Math.max(1, Math.ceil(outcome.retryAfterMs / 1000))
              })
            case "Inactive":
              return yield* inactive(webhook.id, "testing it")
            case "Sent":
              return yield* deliveryOf(webhook.id, outcome.deliveryId)
          }
        }))
      .handle("rotateSecret", ({ path }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const secret = generateWebhookSecret()
          const previousUntil = new Date(Date.now() + ROTATION_OVERLAP_MS).toISOString()
          const rotated = yield* repo.rotateSecret(scopeOf(principal), path.id, secret, previousUntil)
          if (Option.isNone(rotated)) return yield* notFound(path.id)
          return { secret, previous_secret_expires_at: previousUntil }
        }))
  })).pipe(Layer.provide(WebhookDeliveries.Default))

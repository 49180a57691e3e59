/**
 * The webhooks group's handlers, each a function of its request over the services it uses (the
 * repositories, the delivery log, test events), which the group's layer provides.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { generateWebhookSecret } from "../Delivery/Signing.js"
import { BadRequest, Conflict, invalidField, NotFound, TooManyRequests } from "../Domain/Errors.js"
import { nowIso } from "../Domain/Ids.js"
import { pageRequest } from "../Domain/Paging.js"
import { CurrentPrincipal, type Principal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { UrlPolicy } from "../Net/UrlPolicy.js"
import { RECOVER_MAX } from "./Api.js"
import { REDACTED } from "./CustomHeaders.js"
import { WebhookDeliveries } from "./Deliveries.js"
import { deliveryListRecord, deliveryRecord, healthSince, NO_DELIVERIES, webhookRecord } from "./Records.js"
import { type WebhookRow, type WebhookScope, WebhooksRepo } from "./Repo.js"
import type {
  CreateWebhook,
  DeliveriesQuery,
  DeliverySearchQuery,
  ListWebhooksQuery,
  RecoverRequest,
  TestHeaders,
  UpdateWebhook
} from "./Requests.js"
import { TestEvents } from "./TestEvents.js"

/** How long a rotated-out secret keeps signing, so receivers can switch without missing events. */
const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000

const scopeOf = (principal: Principal): WebhookScope => ({
  organizationId: principal.organizationId,
  instanceId: principal.instance?.id
})

export const notFound = (id: string) => new NotFound({ message: `webhook ${id} was not found`, error: "not_found" })

const deliveryNotFound = (id: string) => new NotFound({ message: `delivery ${id} was not found`, error: "not_found" })

export const inactive = (id: string, action: string) =>
  new Conflict({
    message: `webhook ${id} is not active; activate it (PATCH active: true) before ${action}`,
    error: "webhook_inactive"
  })

const limitReached = (instanceId: string, limit: number) =>
  new Conflict({
    message:
      `instance ${instanceId} already has ${limit} webhooks, the most an instance may have (HUB_WEBHOOKS_PER_INSTANCE=${limit}); delete one first`,
    error: "webhook_limit_reached"
  })

/** Secret headers given as REDACTED with no stored value to keep (none, or the url moved to another origin). */
const secretsNotKept = (names: ReadonlyArray<string>, originChanged: boolean) => {
  const why = originChanged
    ? "the url moves to another origin, so no stored value is kept"
    : "no stored value to keep"
  return new BadRequest({
    message: `Invalid request: headers: ${names.join(", ")}: ${why}; give ${
      names.length === 1 ? "its value" : "their values"
    } instead of "${REDACTED}"`,
    error: "validation_failed",
    details: names.map((name) => ({
      field: `headers.${name}`,
      message: `${why}; give its value instead of "${REDACTED}"`
    }))
  })
}

/** A poll webhook is not pushed to: what only a push webhook does is refused for it. */
export const pushedTo = (webhook: WebhookRow, action: string) =>
  webhook.kind === "poll"
    ? Effect.fail(
      new Conflict({
        message:
          `webhook ${webhook.id} is a poll webhook: nothing is pushed to it, so there is no ${action}; read its events with GET /api/webhooks/${webhook.id}/poll (from a cursor, or ?since= for earlier ones)`,
        error: "poll_webhook"
      })
    )
    : Effect.void

/** `until` must come after `since`. */
const checkWindow = (since: string | undefined, until: string | undefined) =>
  since !== undefined && until !== undefined && until <= since
    ? Effect.fail(invalidField("until", "must be after since"))
    : Effect.void

/** The URL policy's verdict on a webhook URL, a refusal as a 400 naming the field. */
const allowedUrl = (url: string) =>
  Effect.flatMap(UrlPolicy, (policy) => policy.check(url)).pipe(
    Effect.mapError((refused) =>
      new BadRequest({
        message: `url is not allowed: ${refused.message}`,
        error: "url_not_allowed",
        details: [{ field: "url", message: refused.message }]
      })
    )
  )

/** One of the caller's webhooks. */
export const findOwn = (id: string) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const found = yield* Effect.flatMap(WebhooksRepo, (repo) => repo.find(scopeOf(principal), id))
    return yield* Option.match(found, { onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed })
  })

/** The records of these webhooks, with their health. */
const withHealth = (rows: ReadonlyArray<WebhookRow>) =>
  Effect.gen(function*() {
    const deliveries = yield* WebhookDeliveries
    const health = yield* deliveries.health(rows.map((row) => row.id), healthSince())
    return rows.map((row) => webhookRecord(row, health.get(row.id) ?? NO_DELIVERIES))
  })

const recordOf = (row: WebhookRow) =>
  Effect.map(withHealth([row]), (records) => records[0] ?? webhookRecord(row, NO_DELIVERIES))

/** A delivery of this webhook with its attempts, as it stands. */
const deliveryOf = (webhookId: string, id: string) =>
  Effect.gen(function*() {
    const deliveries = yield* WebhookDeliveries
    const row = yield* deliveries.find(webhookId, id)
    if (row === undefined) return yield* deliveryNotFound(id)
    return deliveryRecord(row, yield* deliveries.findAttempts(row.id))
  })

/** The instance an organization token names (`instance_id`), or none when it names none. */
const namedInstance = (principal: Principal, instanceId: string | undefined) =>
  instanceId === undefined
    ? Effect.succeed(undefined)
    : Effect.flatMap(InstanceAccess, (access) => access.resolve(principal, { instanceId }))

const createWebhook = (payload: typeof CreateWebhook.Type) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const config = yield* HubConfig
    const access = yield* InstanceAccess
    const instance = yield* access.resolve(principal, { instanceId: payload.instance_id })
    // A poll webhook has no url (the payload's check): nothing to allow.
    if (payload.url !== undefined) yield* allowedUrl(payload.url)
    const secret = generateWebhookSecret()
    const repo = yield* WebhooksRepo
    const row = yield* repo.create({
      organizationId: principal.organizationId,
      instanceId: instance.id,
      name: payload.name,
      url: payload.url ?? "",
      kind: payload.kind,
      secret,
      events: payload.events,
      headers: payload.headers,
      ordering: payload.ordering,
      perInstance: config.webhooksPerInstance
    }).pipe(Effect.catchTag("WebhookLimitReached", ({ limit }) => Effect.fail(limitReached(instance.id, limit))))
    return { ...webhookRecord(row, NO_DELIVERIES), secret }
  })

const listWebhooks = (query: typeof ListWebhooksQuery.Type) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const instance = yield* namedInstance(principal, query.instance_id)
    const repo = yield* WebhooksRepo
    const rows = yield* repo.list(scopeOf(principal), { instanceId: instance?.id, event: query.event })
    return { data: yield* withHealth(rows) }
  })

const updateWebhook = (id: string, payload: typeof UpdateWebhook.Type) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    if (payload.url !== undefined) {
      if ((yield* findOwn(id)).kind === "poll") {
        return yield* invalidField("url", "a poll webhook has no url")
      }
      yield* allowedUrl(payload.url)
    }
    const repo = yield* WebhooksRepo
    const row = yield* repo.update(scopeOf(principal), id, payload).pipe(
      Effect.catchTag("NoSecretToKeep", ({ names, originChanged }) => Effect.fail(secretsNotKept(names, originChanged)))
    )
    return yield* recordOf(
      yield* Option.match(row, { onNone: () => Effect.fail(notFound(id)), onSome: Effect.succeed })
    )
  })

const removeWebhook = (id: string) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const repo = yield* WebhooksRepo
    if (!(yield* repo.remove(scopeOf(principal), id))) return yield* notFound(id)
  })

/** A webhook's delivery log. */
const listDeliveries = (id: string, query: typeof DeliveriesQuery.Type) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    yield* checkWindow(query.since, query.until)
    const page = yield* pageRequest(query)
    const deliveries = yield* WebhookDeliveries
    const listed = yield* deliveries.list({
      webhookIds: [webhook.id],
      status: query.status,
      since: query.since,
      until: query.until,
      page
    })
    return deliveryListRecord(listed, query, page)
  })

/** The delivery log of every webhook the caller sees, narrowed by the filters. */
const searchDeliveries = (query: typeof DeliverySearchQuery.Type) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    yield* checkWindow(query.since, query.until)
    const page = yield* pageRequest(query)
    const instance = yield* namedInstance(principal, query.instance_id)
    const repo = yield* WebhooksRepo
    // Deliveries are found through their webhooks: those the caller sees, narrowed by the filters.
    const webhookIds = query.webhook_id === undefined
      ? (yield* repo.list(scopeOf(principal), { instanceId: instance?.id })).map((w) => w.id)
      : yield* Effect.map(
        findOwn(query.webhook_id),
        (w) => (instance === undefined || w.instance_id === instance.id ? [w.id] : [])
      )
    const deliveries = yield* WebhookDeliveries
    const listed = yield* deliveries.list({
      webhookIds,
      status: query.status,
      since: query.since,
      until: query.until,
      page
    })
    return deliveryListRecord(listed, query, page)
  })

const retryDelivery = (id: string, deliveryId: string) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    yield* pushedTo(webhook, "delivery to retry")
    if (!webhook.active) return yield* inactive(webhook.id, "re-sending")
    const deliveries = yield* WebhookDeliveries
    const outcome = yield* deliveries.replay(webhook.id, deliveryId, nowIso())
    if (outcome === "not_found") return yield* deliveryNotFound(deliveryId)
    if (outcome === "already_queued") {
      return yield* new Conflict({ message: `delivery ${deliveryId} is already queued`, error: "delivery_queued" })
    }
    // Read before waking the dispatcher, so the answer shows the delivery as queued.
    const answer = yield* deliveryOf(webhook.id, deliveryId)
    yield* Effect.map(DispatchSignal, (signal) => signal.notify())
    return answer
  })

const recoverDeliveries = (id: string, payload: typeof RecoverRequest.Type) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    yield* pushedTo(webhook, "delivery to recover")
    if (!webhook.active) return yield* inactive(webhook.id, "recovering its deliveries")
    const now = nowIso()
    const until = payload.until ?? now
    yield* checkWindow(payload.since, until)
    const deliveries = yield* WebhookDeliveries
    const outcome = yield* deliveries.recover(webhook.id, { since: payload.since, until }, now, RECOVER_MAX)
    if (outcome.requeued > 0) yield* Effect.map(DispatchSignal, (signal) => signal.notify())
    return { requeued: outcome.requeued, more: outcome.more, since: payload.since, until }
  })

const sendTest = (id: string, headers: typeof TestHeaders.Type) =>
  Effect.gen(function*() {
    const webhook = yield* findOwn(id)
    yield* pushedTo(webhook, "test event to send")
    if (!webhook.active) return yield* inactive(webhook.id, "testing it")
    const tests = yield* TestEvents
    const outcome = yield* tests.test(webhook, headers["idempotency-key"])
    switch (outcome._tag) {
      case "Repeat": {
        const deliveries = yield* WebhookDeliveries
        yield* tests.awaitFirst(
          outcome.deliveryId,
          Effect.map(deliveries.findAttempts(outcome.deliveryId), (attempts) => attempts.length > 0)
        )
        return yield* deliveryOf(webhook.id, outcome.deliveryId)
      }
      case "TooSoon":
        return yield* new TooManyRequests({
          message: `webhook ${webhook.id} was tested less than a second ago; at most one test per webhook a second`,
          error: "rate_limited",
          retryAfterSeconds: Math.max(1, Math.ceil(outcome.retryAfterMs / 1000))
        })
      case "Inactive":
        return yield* inactive(webhook.id, "testing it")
      case "Sent":
        return yield* deliveryOf(webhook.id, outcome.deliveryId)
    }
  })

const rotateSecret = (id: string) =>
  Effect.gen(function*() {
    const principal = yield* CurrentPrincipal
    const secret = generateWebhookSecret()
    const previousUntil = new Date(Date.now() + ROTATION_OVERLAP_MS).toISOString()
    const repo = yield* WebhooksRepo
    const rotated = yield* repo.rotateSecret(scopeOf(principal), id, secret, previousUntil)
    if (Option.isNone(rotated)) return yield* notFound(id)
    return { secret, previous_secret_expires_at: previousUntil }
  })

export const WebhooksHttpLive = HttpApiBuilder.group(HubApi, "webhooks", (handlers) =>
  handlers
    .handle("create", ({ payload }) => createWebhook(payload))
    .handle("list", ({ urlParams }) => listWebhooks(urlParams))
    .handle("get", ({ path }) => Effect.flatMap(findOwn(path.id), recordOf))
    .handle("update", ({ path, payload }) => updateWebhook(path.id, payload))
    .handle("remove", ({ path }) => removeWebhook(path.id))
    .handle("deliveries", ({ path, urlParams }) => listDeliveries(path.id, urlParams))
    .handle("searchDeliveries", ({ urlParams }) => searchDeliveries(urlParams))
    .handle("retry", ({ path }) => retryDelivery(path.id, path.deliveryId))
    .handle("recover", ({ path, payload }) => recoverDeliveries(path.id, payload))
    .handle("test", ({ headers, path }) => sendTest(path.id, headers))
    .handle("rotateSecret", ({ path }) => rotateSecret(path.id))).pipe(
    Layer.provide([WebhookDeliveries.Default, TestEvents.Default])
  )

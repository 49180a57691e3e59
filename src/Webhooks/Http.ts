import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { HubApi } from "../Api.js"
import { BadRequest, Conflict, NotFound } from "../Domain/Errors.js"
import { nowIso } from "../Domain/Ids.js"
import { CurrentPrincipal, type Principal } from "../Domain/Principal.js"
import { DispatchSignal } from "../Delivery/DispatchSignal.js"
import { type AttemptRow, type DeliveryRow, OutboxRepo } from "../Delivery/Outbox.js"
import { generateWebhookSecret } from "../Delivery/Signing.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { type WebhookRow, type WebhookScope, WebhooksRepo } from "./Repo.js"
import { UrlPolicy } from "../Net/UrlPolicy.js"

/** How long a rotated-out secret keeps signing, so receivers can switch without missing events. */
const ROTATION_OVERLAP_MS = 24 * 60 * 60 * 1000

const record = (row: WebhookRow) => ({
  id: row.id,
  instance_id: row.instance_id,
  url: row.url,
  name: row.name,
  active: row.active,
  ...(row.disabled_reason === null ? {} : { disabled_reason: row.disabled_reason }),
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

const scopeOf = (principal: Principal): WebhookScope => ({
  organizationId: principal.organizationId,
  instanceId: principal.instance?.id
})

const notFound = (id: string) => new NotFound({ message: `webhook ${id} was not found`, error: "not_found" })

export const WebhooksHttpLive = HttpApiBuilder.group(HubApi, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* WebhooksRepo
    const outbox = yield* OutboxRepo
    const access = yield* InstanceAccess
    const policy = yield* UrlPolicy
    const signal = yield* DispatchSignal

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
            secret
          })
          return { ...record(row), secret }
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const instance = urlParams.instance_id === undefined
            ? undefined
            : yield* access.resolve(principal, { instanceId: urlParams.instance_id })
          const rows = yield* repo.list(scopeOf(principal), instance?.id)
          return { data: rows.map(record) }
        }))
      .handle("get", ({ path }) => Effect.map(findOwn(path.id), record))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (payload.url !== undefined) yield* allowedUrl(payload.url)
          const row = yield* repo.update(scopeOf(principal), path.id, payload)
          return record(yield* Option.match(row, { onNone: () => Effect.fail(notFound(path.id)), onSome: Effect.succeed }))
        }))
      .handle("remove", ({ path }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          if (!(yield* repo.remove(scopeOf(principal), path.id))) return yield* notFound(path.id)
        }))
      .handle("deliveries", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          const page = yield* outbox.listForWebhook(webhook.id, urlParams)
          return {
            data: page.rows.map((row) => delivery(row, page.attempts)),
            total: page.total,
            page: urlParams.page,
            limit: urlParams.limit
          }
        }))
      .handle("retry", ({ path }) =>
        Effect.gen(function*() {
          const webhook = yield* findOwn(path.id)
          const missing = new NotFound({ message: `delivery ${path.deliveryId} was not found`, error: "not_found" })
          if (!webhook.active) {
            return yield* new Conflict({
              message: `webhook ${webhook.id} is not active; activate it (PATCH active: true) before re-sending`,
              error: "webhook_inactive"
            })
          }
          const outcome = yield* outbox.replay(webhook.id, path.deliveryId, nowIso())
          if (outcome === "not_found") return yield* missing
          if (outcome === "already_queued") {
            return yield* new Conflict({ message: `delivery ${path.deliveryId} is already queued`, error: "delivery_queued" })
          }
          // Read before waking the dispatcher, so the answer shows the delivery as queued.
          const row = yield* outbox.find(webhook.id, path.deliveryId)
          if (row === undefined) return yield* missing
          const attempts = yield* outbox.findAttempts(row.id)
          yield* signal.notify
          return delivery(row, attempts)
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
  }))

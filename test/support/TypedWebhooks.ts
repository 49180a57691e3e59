/**
 * Webhooks through the typed client (src/Client.ts), as a program calls the hub, for the tests of
 * webhooks and of what reaches them; and the one raw helper they share, the upstream's post.
 */
import { expect } from "@effect/vitest"
import { Effect } from "effect"
import type { HubClient } from "../../src/Client.js"
import { TestHub } from "./TestHub.js"

/** The typed client with `token` (none: no Authorization header), of the test's hub. */
export const typedClient = (token?: string) => Effect.flatMap(TestHub, (hub) => hub.client(token))

type Webhooks = HubClient["webhooks"]

/** What POST /api/webhooks takes, on its decoded side (a url and name already trimmed, valid kinds and headers). */
export type WebhookInput = Parameters<Webhooks["create"]>[0]["payload"]

/** What PATCH /api/webhooks/:id takes, on its decoded side. */
export type WebhookPatch = Parameters<Webhooks["update"]>[0]["payload"]

/** The delivery log's filters on their decoded side. */
export type DeliveryFilters = Parameters<Webhooks["deliveries"]>[0]["urlParams"]

/** GET /api/webhooks/:id/deliveries' defaults (page 1 of 50), which the typed client spells out. */
export const deliveriesFirstPage = { page: 1, limit: 50 } as const

/** POST /api/webhooks with `token`: the created record, with its secret. */
export const createTyped = (token: string, payload: WebhookInput) =>
  Effect.flatMap(typedClient(token), (client) => client.webhooks.create({ payload }))

/** PATCH /api/webhooks/:id with `token`: the changed record. */
export const updateTyped = (token: string, id: string, payload: WebhookPatch) =>
  Effect.flatMap(typedClient(token), (client) => client.webhooks.update({ path: { id }, payload }))

/** GET /api/webhooks/:id with `token`. */
export const readTyped = (token: string, id: string) =>
  Effect.flatMap(typedClient(token), (client) => client.webhooks.get({ path: { id } }))

/** A webhook's delivery log (its first page of 50 unless told), newest first. */
export const deliveriesTyped = (token: string, id: string, filters: Partial<DeliveryFilters> = {}) =>
  Effect.map(
    Effect.flatMap(
      typedClient(token),
      (client) => client.webhooks.deliveries({ path: { id }, urlParams: { ...deliveriesFirstPage, ...filters } })
    ),
    (page) => page.data
  )

/**
 * POST /upstream/events, raw: the upstream posts its envelope as bytes (which its signature would
 * cover); it is no program calling the hub's API. Answers the ingest summary, which must be a 200.
 */
export const postUpstream = (payload: unknown) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const posted = yield* hub.request("POST", "/upstream/events", { json: payload })
    expect(posted.status, posted.text).toBe(200)
    return posted.body
  })

/**
 * Who is who, through the real HTTP server on both engines: the hub pairs a user's number and
 * business-scoped user ids as the upstream and send answers name them together, follows
 * `user_changed_number` and `user_changed_user_id`, and `GET /api/messages?user=` answers a person's
 * whole history by any identifier, records written before the pair was learned included. Statuses
 * and calls that name the user by BSUID alone are recorded; a pre-accept finds the ringing call by it.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, type Tenant, TestHub } from "./support/TestHub.js"
import { individualMessage, messagesFirstPage, sentNow } from "./support/TypedRequests.js"
import { wamid } from "./support/UpstreamPayloads.js"

const NUMBER = "16505551234"
const BSUID = "US.13491208655302741918"
const PARENT = "US.ENT.11815799212886844830"
const NEW_NUMBER = "16505559999"
const NEW_BSUID = "US.77777777777777777777"

const nowSeconds = () => String(Math.floor(Date.now() / 1000))
const metadata = (tenant: Tenant) => ({ display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId })

const postChanges = (tenant: Tenant, ...changes: ReadonlyArray<Record<string, unknown>>) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const posted = yield* hub.request("POST", "/upstream/events", {
      json: { object: "whatsapp_business_account", entry: [{ id: tenant.wabaId, changes }] }
    })
    expect(posted.status).toBe(200)
  })

const messagesChange = (tenant: Tenant, value: Record<string, unknown>) => ({
  field: "messages",
  value: { messaging_product: "whatsapp", metadata: metadata(tenant), ...value }
})

/** A text message as a username user sends it: contacts[] and messages[] naming what is known of them. */
const inbound = (
  tenant: Tenant,
  who: { readonly waId?: string; readonly userId: string; readonly parentUserId?: string }
) => {
  const id = wamid()
  return {
    id,
    change: messagesChange(tenant, {
      contacts: [{
        profile: { name: "Pablo M.", username: "pablomorales" },
        ...(who.waId === undefined ? {} : { wa_id: who.waId }),
        user_id: who.userId,
        ...(who.parentUserId === undefined ? {} : { parent_user_id: who.parentUserId })
      }],
      messages: [{
        ...(who.waId === undefined ? {} : { from: who.waId }),
        from_user_id: who.userId,
        ...(who.parentUserId === undefined ? {} : { from_parent_user_id: who.parentUserId }),
        id,
        timestamp: nowSeconds(),
        type: "text",
        text: { body: "Hello" }
      }]
    })
  }
}

/** The tenant's instance token's typed client. */
const clientOf = (tenant: Tenant) => Effect.flatMap(TestHub, (hub) => hub.client(tenant.instanceToken))

/** The records of GET /api/messages through the typed client. */
const recordsOf = (
  tenant: Tenant,
  filters: { readonly user?: string; readonly waMessageId?: string; readonly direction?: "inbound" | "outbound" }
) =>
  Effect.map(
    Effect.flatMap(clientOf(tenant), (client) =>
      client.messages.list({ urlParams: { ...messagesFirstPage, ...filters } })),
    (page) =>
      page.data
  )

const historyOf = (tenant: Tenant, user: string) =>
  Effect.gen(function*() {
    const client = yield* clientOf(tenant)
    const listed = yield* client.messages.list({ urlParams: { page: 1, limit: 100, user } })
    return listed.data.map((record) => record.waMessageId).sort()
  })

const send = (tenant: Tenant, target: { readonly to: string } | { readonly recipient: string }) =>
  Effect.gen(function*() {
    const client = yield* clientOf(tenant)
    const sent = yield* sentNow(client.messages.send({
      payload: { ...individualMessage, type: "text", text: { body: "Hi" }, ...target },
      headers: {}
    }))
    return sent.messages[0]?.id ?? ""
  })

describe.each(["sqlite", "postgres"] as const)("identities (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })("", (it) => {
    it.effect("a person's history by number or BSUID, records from before the pair was learned included", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const stranger = yield* seedTenant()
        // Sent to the number while nothing paired it with a BSUID; then one message by BSUID alone.
        const toNumber = yield* send(tenant, { to: NUMBER })
        const first = inbound(tenant, { userId: BSUID })
        yield* postChanges(tenant, first.change)
        expect(yield* historyOf(tenant, NUMBER)).toEqual([toNumber])
        expect(yield* historyOf(tenant, BSUID)).toEqual([first.id])
        // A message naming both pairs them: each identifier now answers all three.
        const both = inbound(tenant, { waId: NUMBER, userId: BSUID, parentUserId: PARENT })
        yield* postChanges(tenant, both.change)
        const all = [toNumber, first.id, both.id].sort()
        expect(yield* historyOf(tenant, NUMBER)).toEqual(all)
        expect(yield* historyOf(tenant, `+${NUMBER}`)).toEqual(all)
        expect(yield* historyOf(tenant, BSUID)).toEqual(all)
        expect(yield* historyOf(tenant, PARENT)).toEqual(all)
        // Pairs are the organization's own: another one's history of the same number holds none of these.
        expect(yield* historyOf(stranger, BSUID)).toEqual([])
        const [record] = yield* recordsOf(tenant, { waMessageId: both.id })
        expect(record).toMatchObject({
          to: NUMBER,
          userId: BSUID,
          parentUserId: PARENT,
          username: "pablomorales",
          direction: "inbound"
        })
        // Filters combine with the person.
        const outbound = yield* recordsOf(tenant, { user: BSUID, direction: "outbound" })
        expect(outbound.map((r) => r.waMessageId)).toEqual([toNumber])
      }))

    it.effect("a send answered with both identifiers pairs them; a status naming the user by BSUID alone moves its record", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const fake = yield* FakeGraph
        const answerId = wamid()
        yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, {
          body: {
            messaging_product: "whatsapp",
            contacts: [{ input: BSUID, wa_id: NUMBER, user_id: BSUID }],
            messages: [{ id: answerId }]
          }
        })
        expect(yield* send(tenant, { recipient: BSUID })).toBe(answerId)
        // A message naming the number only: the send's answer is what ties it to the BSUID the send record holds.
        const fromNumber = wamid()
        yield* postChanges(
          tenant,
          messagesChange(tenant, {
            contacts: [{ profile: { name: "P" }, wa_id: NUMBER }],
            messages: [{ from: NUMBER, id: fromNumber, timestamp: nowSeconds(), type: "text", text: { body: "x" } }]
          })
        )
        expect(yield* historyOf(tenant, BSUID)).toEqual([answerId, fromNumber].sort())
        yield* postChanges(
          tenant,
          messagesChange(tenant, {
            statuses: [{ id: answerId, status: "delivered", timestamp: nowSeconds(), recipient_user_id: BSUID }]
          })
        )
        const [record] = yield* recordsOf(tenant, { waMessageId: answerId })
        expect(record).toMatchObject({ status: "delivered", to: BSUID, userId: BSUID })
      }))

    it.effect("user_changed_number and user_changed_user_id keep one person across numbers and ids", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const before = inbound(tenant, { waId: NUMBER, userId: BSUID })
        yield* postChanges(tenant, before.change)
        const changedNumber = wamid()
        yield* postChanges(
          tenant,
          messagesChange(tenant, {
            messages: [{
              from: NUMBER,
              id: changedNumber,
              timestamp: nowSeconds(),
              type: "system",
              system: {
                body: "User changed number",
                type: "user_changed_number",
                wa_id: NEW_NUMBER,
                user_id: NEW_BSUID,
                previous_user_id: BSUID
              }
            }]
          })
        )
        const after = inbound(tenant, { userId: NEW_BSUID })
        yield* postChanges(tenant, after.change)
        const renewed = "US.88888888888888888888"
        const changedId = wamid()
        yield* postChanges(
          tenant,
          messagesChange(tenant, {
            messages: [{
              from_user_id: renewed,
              id: changedId,
              timestamp: nowSeconds(),
              type: "system",
              system: {
                body: "User id changed",
                type: "user_changed_user_id",
                user_id: renewed,
                previous_user_id: NEW_BSUID
              }
            }]
          })
        )
        const all = [before.id, changedNumber, after.id, changedId].sort()
        for (const identifier of [NUMBER, NEW_NUMBER, BSUID, NEW_BSUID, renewed]) {
          expect(yield* historyOf(tenant, identifier), identifier).toEqual(all)
        }
      }))

    it.effect("?user= must be a number or a business-scoped user id", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
        for (const user of ["us.123", "abc", "12"]) {
          const refused = yield* hub.request("GET", `/api/messages?user=${user}`, { token: tenant.instanceToken })
          expect(refused.status).toBe(400)
          expect(refused.body).toMatchObject({
            error: "validation_failed",
            details: [{
              field: "user",
              message:
                "must be a number in wa_id form (country code and number, digits) or a business-scoped user id such as US.13491208655302741918"
            }]
          })
        }
      }))

    it.effect("a call from a username user is recorded by BSUID; a pre-accept to it finds the ringing call and names it as recipient", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const callId = `wacid.${wamid().slice(6)}`
        yield* postChanges(tenant, {
          field: "calls",
          value: {
            messaging_product: "whatsapp",
            metadata: metadata(tenant),
            contacts: [{ profile: { name: "Pablo" }, user_id: BSUID }],
            calls: [{
              id: callId,
              from_user_id: BSUID,
              to: "15550783881",
              event: "connect",
              direction: "USER_INITIATED",
              timestamp: nowSeconds(),
              session: { sdp_type: "offer", sdp: "v=0\r\n" }
            }]
          }
        })
        const client = yield* hub.client(tenant.instanceToken)
        yield* client.calls.preAccept({ payload: { to: BSUID } })
        expect((yield* fake.lastRequest).json).toEqual({
          messaging_product: "whatsapp",
          recipient: BSUID,
          action: "pre_accept",
          call_id: callId
        })
        // The same call by number once the pair is known (a later message naming both); unknown before.
        yield* refusedWith(client.calls.preAccept({ payload: { to: NUMBER } }), "Conflict")
        yield* postChanges(tenant, inbound(tenant, { waId: NUMBER, userId: BSUID }).change)
        yield* client.calls.preAccept({ payload: { to: `+${NUMBER}` } })
        expect((yield* fake.lastRequest).json).toEqual({
          messaging_product: "whatsapp",
          to: NUMBER,
          action: "pre_accept",
          call_id: callId
        })
      }))
  })
})

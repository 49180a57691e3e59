import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { HubClient } from "../src/Client.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { addInstance, seedTenant, type Tenant, TestHub } from "./support/TestHub.js"

const sdp = "v=0\r\no=- 7669997803033704573 2 IN IP4 127.0.0.1\r\n"
const CALLER = "5511987654321"

const nowSeconds = () => Math.floor(Date.now() / 1000)

interface CallItem {
  readonly id: string
  readonly event: "connect" | "terminate"
  readonly from?: string
  readonly to?: string
  readonly direction?: string
  readonly at?: number
}

/** The upstream's `calls` change for a number: call events (connect, terminate) and call statuses. */
const callsChange = (
  phoneNumberId: string,
  calls: ReadonlyArray<CallItem>,
  statuses: ReadonlyArray<Record<string, string>> = []
) => ({
  field: "calls",
  value: {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: phoneNumberId },
    contacts: [{ profile: { name: "Caller" }, wa_id: CALLER }],
    calls: calls.map((c) => ({
      id: c.id,
      from: c.from ?? CALLER,
      to: c.to ?? "15550783881",
      event: c.event,
      timestamp: String(c.at ?? nowSeconds()),
      ...(c.direction === undefined ? {} : { direction: c.direction }),
      ...(c.event === "connect" ? { session: { sdp_type: "offer", sdp } } : { status: "COMPLETED" })
    })),
    ...(statuses.length === 0 ? {} : { statuses })
  }
})

const postCalls = (tenant: { readonly wabaId: string }, ...changes: ReadonlyArray<ReturnType<typeof callsChange>>) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const posted = yield* hub.request("POST", "/upstream/events", {
      json: { object: "whatsapp_business_account", entry: [{ id: tenant.wabaId, changes }] }
    })
    expect(posted.status).toBe(200)
  })

/** A raw pre-accept: for bodies the typed client cannot send. */
const preAccept = (token: string, json: unknown) =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", "/api/calls/pre-accept", { token, json }))

/** A pre-accept through the typed client. */
const preAccepting = (token: string, payload: Parameters<HubClient["calls"]["preAccept"]>[0]["payload"]) =>
  Effect.flatMap(Effect.flatMap(TestHub, (hub) => hub.client(token)), (client) => client.calls.preAccept({ payload }))

/** The call id the upstream was asked to pre-accept by the last request. */
const preAcceptedCallId = Effect.map(Effect.flatMap(FakeGraph, (fake) => fake.lastRequest), (sent) => {
  const json = sent.json
  expect(json).toMatchObject({ action: "pre_accept" })
  return typeof json === "object" && json !== null && "call_id" in json ? json.call_id : undefined
})

const expectNoRingingCall = (tenant: Tenant, to = CALLER) =>
  Effect.gen(function*() {
    const fake = yield* FakeGraph
    const before = (yield* fake.requests).length
    const refused = yield* refusedWith(preAccepting(tenant.instanceToken, { to }), "Conflict")
    expect({ message: refused.message, error: refused.error, details: refused.details }).toEqual({
      message:
        `No call from ${to} is ringing on this number: pass call_id, or wait for the call's connect webhook (calls field) to arrive`,
      error: "no_ringing_call",
      details: undefined
    })
    expect((yield* fake.requests).length).toBe(before)
  })

layer(testHubOnFakeGraph())("calls on the Graph API", (it) => {
  it.effect("POST /api/calls/pre-accept with a call_id adds messaging_product and action, and answers {success}", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-calls" })
      const minimal = yield* preAccepting(tenant.instanceToken, {
        to: CALLER,
        call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA"
      })
      expect(minimal).toEqual({ success: true })
      let sent = yield* fake.lastRequest
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/calls`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-calls")
      expect(sent.json).toEqual({
        messaging_product: "whatsapp",
        to: CALLER,
        action: "pre_accept",
        call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA"
      })

      yield* preAccepting(tenant.instanceToken, {
        to: CALLER,
        call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA",
        session: { sdp_type: "answer", sdp },
        action: "reject"
      })
      sent = yield* fake.lastRequest
      expect(sent.json).toEqual({
        messaging_product: "whatsapp",
        to: CALLER,
        action: "pre_accept",
        call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA",
        session: { sdp_type: "answer", sdp }
      })
    }))

  it.effect("without call_id, the newest call from `to` still ringing on that instance is pre-accepted", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const second = yield* addInstance(tenant)
      yield* expectNoRingingCall(tenant)

      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [
          { id: "wacid.OLDER", event: "connect", direction: "USER_INITIATED", at: nowSeconds() - 30 },
          { id: "wacid.NEWER", event: "connect", direction: "USER_INITIATED", at: nowSeconds() - 5 },
          { id: "wacid.OTHER_CALLER", event: "connect", from: "5511900000000", at: nowSeconds() }
        ]),
        callsChange(second.phoneNumberId, [{
          id: "wacid.OTHER_NUMBER",
          event: "connect",
          direction: "USER_INITIATED",
          at: nowSeconds()
        }])
      )
      const calls = yield* sql<
        { readonly call_id: string; readonly user_number: string; readonly state: string; readonly direction: string }
      >`
        SELECT call_id, user_number, state, direction FROM calls WHERE instance_id = ${tenant.instanceId} ORDER BY call_id`
      expect(calls).toEqual([
        { call_id: "wacid.NEWER", user_number: CALLER, state: "ringing", direction: "USER_INITIATED" },
        { call_id: "wacid.OLDER", user_number: CALLER, state: "ringing", direction: "USER_INITIATED" },
        // A connect without direction that brings the user's offer is an incoming call.
        { call_id: "wacid.OTHER_CALLER", user_number: "5511900000000", state: "ringing", direction: "USER_INITIATED" }
      ])

      yield* preAccepting(tenant.instanceToken, { to: CALLER, session: { sdp_type: "answer", sdp } })
      expect((yield* FakeGraph.pipe(Effect.flatMap((fake) => fake.lastRequest))).json).toEqual({
        messaging_product: "whatsapp",
        to: CALLER,
        action: "pre_accept",
        call_id: "wacid.NEWER",
        session: { sdp_type: "answer", sdp }
      })

      // The newer call ends: the older one, still ringing, is the one meant.
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [{ id: "wacid.NEWER", event: "terminate", direction: "USER_INITIATED" }])
      )
      yield* preAccepting(tenant.instanceToken, { to: CALLER })
      expect(yield* preAcceptedCallId).toBe("wacid.OLDER")

      // Accepted (a call status) is no longer ringing either.
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [], [{
          id: "wacid.OLDER",
          status: "ACCEPTED",
          type: "call",
          timestamp: String(nowSeconds()),
          recipient_id: CALLER
        }])
      )
      yield* expectNoRingingCall(tenant)

      // Another instance's call from the same number is that instance's own.
      yield* preAccepting(second.instanceToken, { to: CALLER })
      expect(yield* preAcceptedCallId).toBe("wacid.OTHER_NUMBER")
    }))

  it.effect("a call terminated, too old, placed by the business, or ended before its connect arrived is not ringing", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      // Ended before the connect was delivered: the late connect does not make it ring again.
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [{ id: "wacid.LATE", event: "terminate", direction: "USER_INITIATED" }])
      )
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [{ id: "wacid.LATE", event: "connect", direction: "USER_INITIATED" }])
      )
      // Rang ten minutes ago, and its terminate webhook never came.
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [{
          id: "wacid.OLD",
          event: "connect",
          direction: "USER_INITIATED",
          at: nowSeconds() - 600
        }])
      )
      // The business called the user: a call status says RINGING, but it is no incoming call.
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [], [{
          id: "wacid.OUT",
          status: "RINGING",
          type: "call",
          timestamp: String(nowSeconds()),
          recipient_id: CALLER
        }])
      )
      yield* postCalls(
        tenant,
        callsChange(tenant.phoneNumberId, [{
          id: "wacid.OUT2",
          event: "connect",
          from: "15550783881",
          to: CALLER,
          direction: "BUSINESS_INITIATED"
        }])
      )
      yield* expectNoRingingCall(tenant)

      const sql = yield* SqlClient.SqlClient
      const calls = yield* sql<{ readonly call_id: string; readonly state: string; readonly user_number: string }>`
        SELECT call_id, state, user_number FROM calls WHERE instance_id = ${tenant.instanceId} ORDER BY call_id`
      expect(calls).toEqual([
        { call_id: "wacid.LATE", state: "ended", user_number: CALLER },
        { call_id: "wacid.OLD", state: "ringing", user_number: CALLER },
        { call_id: "wacid.OUT", state: "ringing", user_number: CALLER },
        { call_id: "wacid.OUT2", state: "connected", user_number: CALLER }
      ])
    }))

  it.effect("bad input is 400 naming each field; nothing goes upstream", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<{ field: string; message: string }>]> = [
        [{}, [{ field: "to", message: "is missing" }]],
        [{ to: "+55 11 98765-4321" }, [{
          field: "to",
          message:
            "must be a number in wa_id form (country code and number, digits) or a business-scoped user id such as US.13491208655302741918"
        }]],
        [{ to: CALLER, session: { sdp_type: "pranswer" } }, [
          { field: "session.sdp_type", message: "must be answer or offer" },
          { field: "session.sdp", message: "is missing" }
        ]],
        [{ to: CALLER, call_id: "has spaces" }, [{
          field: "call_id",
          message: "must be the upstream call id (wacid.…)"
        }]]
      ]
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      for (const [payload, details] of cases) {
        const result = yield* preAccept(tenant.instanceToken, payload)
        expect({ payload, status: result.status, details: result.body.details }).toEqual({
          payload,
          status: 400,
          details
        })
      }
      expect(yield* fake.requests).toEqual([])
    }))

  it.effect("an upstream refusal (no call permission) keeps its meaning; organization tokens get 403", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/calls` }, {
        status: 400,
        body: { error: { message: "(#138006) No call permission", code: 138006, fbtrace_id: "T" } }
      })
      const refused = yield* refusedWith(
        preAccepting(tenant.instanceToken, { to: CALLER, call_id: "wacid.ABGGFjFVU2AfAgo6V" }),
        "BadRequest"
      )
      expect({ message: refused.message, error: refused.error, details: refused.details }).toEqual({
        message: "(#138006) No call permission",
        error: "calling_refused",
        details: { upstream: { code: 138006, fbtrace_id: "T" } }
      })
      const byOrg = yield* refusedWith(preAccepting(tenant.orgToken, { to: CALLER }), "Forbidden")
      expect(byOrg.error).toBe("forbidden_token_kind")
    }))
})

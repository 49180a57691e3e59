import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const sdp = "v=0\r\no=- 7669997803033704573 2 IN IP4 127.0.0.1\r\n"

layer(testHubOnFakeGraph())("calls on the Graph API", (it) => {
  it.effect("POST /api/calls/pre-accept adds messaging_product and action, and answers {success}", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-calls" })
      const minimal = yield* hub.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: { to: "5511987654321" } })
      expect(minimal.status).toBe(200)
      expect(minimal.body).toEqual({ success: true })
      let sent = yield* fake.lastRequest
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/calls`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-calls")
      expect(sent.json).toEqual({ messaging_product: "whatsapp", to: "5511987654321", action: "pre_accept" })

      const full = yield* hub.request("POST", "/api/calls/pre-accept", {
        token: tenant.instanceToken,
        json: { to: "5511987654321", call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA", session: { sdp_type: "answer", sdp }, action: "reject" }
      })
      expect(full.status).toBe(200)
      sent = yield* fake.lastRequest
      expect(sent.json).toEqual({
        messaging_product: "whatsapp",
        to: "5511987654321",
        action: "pre_accept",
        call_id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA",
        session: { sdp_type: "answer", sdp }
      })
    }))

  it.effect("bad input is 400 naming each field; nothing goes upstream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<{ field: string; message: string }>]> = [
        [{}, [{ field: "to", message: "is missing" }]],
        [{ to: "+55 11 98765-4321" }, [{ field: "to", message: "must be the caller's number in wa_id form: country code and number, digits only, no +" }]],
        [{ to: "5511987654321", session: { sdp_type: "pranswer" } }, [
          { field: "session.sdp_type", message: "must be answer or offer" },
          { field: "session.sdp", message: "is missing" }
        ]],
        [{ to: "5511987654321", call_id: "has spaces" }, [{ field: "call_id", message: "must be the upstream call id (wacid.…)" }]]
      ]
      for (const [payload, details] of cases) {
        const result = yield* hub.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: payload })
        expect({ payload, status: result.status, details: result.body.details }).toEqual({ payload, status: 400, details })
      }
      expect(yield* fake.requests).toEqual([])
    }))

  it.effect("an upstream refusal (no call permission) keeps its meaning; organization tokens get 403", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/calls` }, {
        status: 400,
        body: { error: { message: "(#138006) No call permission", code: 138006, fbtrace_id: "T" } }
      })
      const refused = yield* hub.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: { to: "5511987654321" } })
      expect(refused.status).toBe(400)
      expect(refused.body).toEqual({
        statusCode: 400,
        message: "(#138006) No call permission",
        error: "upstream_error",
        details: { upstream: { code: 138006, fbtrace_id: "T" } }
      })
      const byOrg = yield* hub.request("POST", "/api/calls/pre-accept", { token: tenant.orgToken, json: { to: "5511987654321" } })
      expect(byOrg.status).toBe(403)
      expect(byOrg.body).toMatchObject({ error: "forbidden_token_kind" })
    }))
})

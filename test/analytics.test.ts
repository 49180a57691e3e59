import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const activities = {
  data: [{
    id: "1234567890123456",
    activity_type: "TEMPLATE_CREATED",
    timestamp: "2025-10-14T16:45:00Z",
    actor_type: "USER",
    actor_name: "Marketing Team",
    details: { template_name: "welcome_message", nested: [1, null, true] }
  }],
  paging: {
    cursors: { before: "MTAxNTExOTQ1MjAwNzI5NDE=", after: "NDMyNzQyODI3OTQw" },
    next: "https://graph.facebook.com/v23.0/102290129340398/activities?limit=25&after=NDMyNzQyODI3OTQw"
  }
}

layer(testHubOnFakeGraph())("analytics on the Graph API", (it) => {
  it.effect("GET /api/analytics/activities maps the query and passes the envelope through unchanged", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-analytics" })
      yield* fake.respond({ method: "GET", path: `/${tenant.wabaId}/activities` }, { body: activities })
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* client.analytics.activities({
        urlParams: {
          since: "1760000000",
          until: "2025-10-20T00:00:00Z",
          limit: 25,
          fields: "id,activity_type",
          after: "abc",
          type: "TEMPLATE_CREATED,USER_ADDED"
        }
      })
      expect(result).toEqual(activities)
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.wabaId}/activities`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-analytics")
      expect(sent.query).toEqual({
        since: "1760000000",
        until: "2025-10-20T00:00:00Z",
        limit: "25",
        fields: "id,activity_type",
        after: "abc",
        activity_type: "TEMPLATE_CREATED,USER_ADDED"
      })
    }))

  it.effect("an organization token reads analytics by naming the instance; without a name it is 400", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const client = yield* hub.client(tenant.orgToken)
      yield* client.analytics.activities({ urlParams: { phone_number_id: tenant.phoneNumberId } })
      expect((yield* fake.lastRequest).path).toBe(`/v23.0/${tenant.wabaId}/activities`)
      expect((yield* fake.lastRequest).query).toEqual({})
      yield* client.analytics.compliance({ urlParams: { instance_id: tenant.instanceId } })
      expect((yield* fake.lastRequest).path).toBe(`/v23.0/${tenant.phoneNumberId}/business_compliance_info`)
      const unnamed = yield* refusedWith(client.analytics.compliance({ urlParams: {} }), "BadRequest")
      expect(unnamed.error).toBe("instance_required")
      const other = yield* seedTenant()
      yield* refusedWith(
        client.analytics.activities({ urlParams: { phone_number_id: other.phoneNumberId } }),
        "NotFound"
      )
      const session = yield* hub.client(tenant.sessionToken)
      yield* refusedWith(session.analytics.activities({ urlParams: { instance_id: tenant.instanceId } }), "Forbidden")
    }))

  it.effect("since and until take Unix seconds or ISO 8601, in order; limit is 1 to 100", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const timeRule = "must be a Unix timestamp in seconds or an ISO 8601 time such as 2025-10-14T16:45:00Z"
      const cases: ReadonlyArray<readonly [string, ReadonlyArray<{ field: string; message: string }>]> = [
        ["since=yesterday&until=2025-13-45", [{ field: "since", message: timeRule }, {
          field: "until",
          message: timeRule
        }]],
        ["since=2025-10-20&until=2025-10-14T00:00:00Z", [{ field: "until", message: "must not be before since" }]],
        ["since=1760000000&until=1700000000", [{ field: "until", message: "must not be before since" }]],
        ["limit=0", [{ field: "limit", message: "must be a whole number from 1 to 100" }]],
        ["limit=101", [{ field: "limit", message: "must be a whole number from 1 to 100" }]],
        ["limit=2.5", [{ field: "limit", message: "must be a whole number from 1 to 100" }]],
        ["type=template created", [{
          field: "type",
          message: "must be activity types such as TEMPLATE_CREATED, comma separated"
        }]]
      ]
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      for (const [query, details] of cases) {
        const result = yield* hub.request("GET", `/api/analytics/activities?${query}`, { token: tenant.instanceToken })
        expect({ query, status: result.status, details: result.body.details }).toEqual({ query, status: 400, details })
      }
      expect(yield* fake.requests).toEqual([])
      const client = yield* hub.client(tenant.instanceToken)
      yield* client.analytics.activities({
        urlParams: { since: "2025-10-14", until: "2025-10-14T23:59:59.999+02:00", limit: 100 }
      })
    }))

  it.effect("GET /api/analytics/compliance passes the envelope through unchanged", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-compliance" })
      const info = {
        data: [{
          whatsapp_business_account_id: "102290129340398",
          entity_name: null,
          is_registered: false,
          grievance_officer_details: null,
          compliance_status: "NOT_REGISTERED",
          country_code: "IN"
        }]
      }
      yield* fake.respond({ method: "GET", path: `/${tenant.phoneNumberId}/business_compliance_info` }, { body: info })
      const client = yield* hub.client(tenant.instanceToken)
      expect(yield* client.analytics.compliance({ urlParams: {} })).toEqual(info)
      const sent = yield* fake.lastRequest
      expect(sent.headers.authorization).toBe("Bearer EAAG-compliance")
      expect(sent.query).toEqual({})
    }))

  it.effect("an unreadable upstream answer is a 502, not the caller's fault", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "GET", path: `/${tenant.wabaId}/activities` }, { body: { result: "no data key" } })
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* refusedWith(client.analytics.activities({ urlParams: {} }), "UpstreamFailure")
      expect(result.status).toBe(502)
      expect(result.error).toBe("upstream_invalid_response")
    }))
})

import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

/** The number's group list (GET /{phone-number-id}/groups) names these groups. */
const listsGroups = (tenant: { readonly phoneNumberId: string }, ...ids: ReadonlyArray<string>) =>
  Effect.flatMap(
    FakeGraph,
    (fake) =>
      fake.respond({ method: "GET", path: `/${tenant.phoneNumberId}/groups` }, {
        body: { data: ids.map((id) => ({ id })), paging: { cursors: {} } }
      }, 10)
  )

layer(testHubOnFakeGraph())("groups and business profile on the Graph API", (it) => {
  it.effect("GET /groups/{id} renames the upstream fields as the spec names them", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-groups" })
      yield* listsGroups(tenant, "Y2FwaV9ncm91cDoxOTUwNTU1MDA3OToxMjAzNjMzOTQzMjA4OTY0MTU")
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* client.groups.get({ path: { groupId: "120363394320896415@g.us" } })
      expect(result).toEqual({
        id: "120363394320896415@g.us",
        subject: "Lucky Shrub VIPs",
        description: "Early access to drops",
        creation_time: 1750269342,
        participants_count: 2
      })
      const sent = yield* fake.lastRequest
      expect(sent.method).toBe("GET")
      expect(decodeURIComponent(sent.path)).toBe("/v23.0/120363394320896415@g.us")
      expect(sent.headers.authorization).toBe("Bearer EAAG-groups")

      // The @ as the wire may carry it, escaped: raw.
      const encoded = yield* hub.request("GET", "/groups/120363394320896415%40g.us", { token: tenant.instanceToken })
      expect(encoded.status).toBe(200)
    }))

  it.effect("a group without a description, with the timestamp as text, still reads", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* listsGroups(tenant, "1203@g.us")
      yield* fake.respond({ path: /(@|%40)g\.us$/ }, {
        body: {
          id: "1203@g.us",
          subject: "Team",
          creation_timestamp: "1750269342",
          participants: [{ wa_id: "1" }, { wa_id: "2" }, { wa_id: "3" }]
        }
      })
      const result = yield* (yield* hub.client(tenant.instanceToken)).groups.get({ path: { groupId: "1203@g.us" } })
      expect(result).toEqual({
        id: "1203@g.us",
        subject: "Team",
        description: "",
        creation_time: 1750269342,
        participants_count: 3
      })
    }))

  it.effect("a Cloud API group id (opaque, as Graph and the group webhooks give it) reads the same", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-cloud-group" })
      // The group id of Meta's OpenAPI document (GET /{group_id}) and the group of its research example.
      const id = "Y2FwaV9ncm91cDoxOTUwNTU1MDA3OToxMjAzNjMzOTQzMjAdOTY0MTUZD"
      yield* listsGroups(tenant, id)
      yield* fake.respond({ method: "GET", path: `/${id}` }, {
        body: {
          id,
          messaging_product: "whatsapp",
          subject: "Artificial Intelligence Insights",
          description: "Explore AI developments",
          creation_timestamp: 683731200,
          suspended: false,
          total_participant_count: 6,
          participants: [{ wa_id: "16505551234" }],
          join_approval_mode: "approval_required"
        }
      })
      const result = yield* (yield* hub.client(tenant.instanceToken)).groups.get({ path: { groupId: id } })
      expect(result).toEqual({
        id,
        subject: "Artificial Intelligence Insights",
        description: "Explore AI developments",
        creation_time: 683731200,
        participants_count: 6
      })
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${id}`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-cloud-group")
    }))

  it.effect("a malformed group id is 400; an unknown group 404; organization tokens 403", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      // A bare number would name another Graph node (a phone number, a media object): refused too.
      // Malformed on purpose: the typed client would refuse to encode these ids, so they go raw.
      for (const id of ["abc@g.us", "12345", "1234567890123", "12345@s.whatsapp.net", "short", "has%20space"]) {
        const result = yield* hub.request("GET", `/groups/${id}`, { token: tenant.instanceToken })
        expect(result.status).toBe(400)
        expect(result.body.details).toEqual([{
          field: "groupId",
          message: "must be a group id: <number>@g.us, or the Cloud API's group id (letters, digits, - and _)"
        }])
      }
      // Listed, but the Graph does not know it: its refusal is a 404 too.
      yield* listsGroups(tenant, "999@g.us")
      yield* fake.respond({ path: /(@|%40)g\.us$/ }, {
        status: 400,
        body: { error: { message: "Unsupported get request", code: 100, error_subcode: 33 } }
      })
      const missing = yield* refusedWith(
        (yield* hub.client(tenant.instanceToken)).groups.get({ path: { groupId: "999@g.us" } }),
        "NotFound"
      )
      expect(missing.message).toBe("group 999@g.us was not found")
      expect(missing.error).toBe("not_found")
      expect(missing.details).toBeUndefined()
      const byOrg = yield* refusedWith(
        (yield* hub.client(tenant.orgToken)).groups.get({ path: { groupId: "999@g.us" } }),
        "Forbidden"
      )
      expect(byOrg.error).toBe("forbidden_token_kind")
    }))

  it.effect("a group another number has is 404 for this instance, in either id form, and its details are never read", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const owner = yield* seedTenant()
      const stranger = yield* seedTenant()
      const opaque = "Y2FwaV9ncm91cDoxOTUwNTU1MDA3OToxMjAzNjMzOTQzMjA4OTY0MTU"
      yield* listsGroups(owner, opaque)
      yield* fake.reset
      yield* listsGroups(owner, opaque)
      yield* fake.respond({ method: "GET", path: /\/v23\.0\/(Y2Fwa|\d+(@|%40)g\.us)/ }, {
        body: { id: opaque, subject: "Team", creation_timestamp: 1750269342 }
      }, 10)
      const ownerClient = yield* hub.client(owner.instanceToken)
      const strangerClient = yield* hub.client(stranger.instanceToken)
      for (const id of [opaque, "120363394320896415@g.us"]) {
        yield* ownerClient.groups.get({ path: { groupId: id } })
        const foreign = yield* refusedWith(strangerClient.groups.get({ path: { groupId: id } }), "NotFound")
        expect({ message: foreign.message, error: foreign.error, details: foreign.details }).toEqual({
          message: `group ${id} was not found`,
          error: "not_found",
          details: undefined
        })
      }
      const lookups = (yield* fake.requests).filter((r) => !r.path.endsWith("/groups")).map((r) =>
        decodeURIComponent(r.path)
      )
      expect(lookups).toEqual([`/v23.0/${opaque}`, "/v23.0/120363394320896415@g.us"])
    }))

  it.effect("GET /api/business-profile answers the profile object itself, for instance tokens only", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-profile" })
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* client.businessProfile.get({ urlParams: {} })
      expect(result).toEqual({
        about: "Plants, delivered.",
        address: "1 Hacker Way",
        description: "Lucky Shrub",
        email: "hello@luckyshrub.com",
        profile_picture_url: "https://example.com/p.jpg",
        websites: ["https://luckyshrub.com"],
        vertical: "RETAIL",
        messaging_product: "whatsapp"
      })
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/whatsapp_business_profile`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-profile")

      // Meta's OpenAPI examples nest the profile once more; it unwraps the same.
      yield* fake.respond({ path: `/${tenant.phoneNumberId}/whatsapp_business_profile` }, {
        body: { data: [{ business_profile: { about: "Nested", vertical: "RESTAURANT" } }] }
      })
      const nested = yield* client.businessProfile.get({ urlParams: { fields: "about,vertical" } })
      expect(nested).toEqual({ about: "Nested", vertical: "RESTAURANT" })
      expect((yield* fake.lastRequest).query).toEqual({ fields: "about,vertical" })

      // instance_id is no parameter of this endpoint (the typed client cannot name it): raw.
      const byOrg = yield* hub.request("GET", `/api/business-profile?instance_id=${tenant.instanceId}`, {
        token: tenant.orgToken
      })
      expect(byOrg.status).toBe(403)
      expect(byOrg.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
    }))
})

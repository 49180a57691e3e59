/**
 * POST, DELETE and GET /api/block-users: on the sandbox (blocked users kept per number, 999139100
 * refused one by one) and against the fake Graph (the exact body the upstream receives, Meta's
 * mixed-outcome 139100 answer reported per user).
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"

const NUMBER = "16505551234"
const BSUID = "US.13491208655302741918"

/** The typed client with `token`. */
const clientWith = (token: string) => Effect.flatMap(TestHub, (hub) => hub.client(token))

/** A raw call: for bodies the typed client cannot send. */
const blockUsers = (method: "POST" | "DELETE", token: string, json: unknown) =>
  Effect.flatMap(TestHub, (hub) => hub.request(method, "/api/block-users", { token, json }))

const listBlocked = (token: string, query = "") =>
  Effect.flatMap(TestHub, (hub) => hub.request("GET", `/api/block-users${query}`, { token }))

layer(testHub())("block users on the sandbox", (it) => {
  it.effect("blocks a number and a business-scoped user id, lists them page by page, unblocks one", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      // Through the typed client, as a program calls the hub.
      const hub = yield* (yield* TestHub).client(tenant.instanceToken)
      const blocked = yield* hub.blockUsers.block({ payload: { users: [`+${NUMBER}`, BSUID] } })
      expect(blocked).toEqual({ added_users: [{ input: NUMBER, wa_id: NUMBER }, { input: BSUID, user_id: BSUID }] })

      const listed = yield* hub.blockUsers.list({ urlParams: {} })
      expect(listed.data).toEqual([{ messaging_product: "whatsapp", wa_id: NUMBER }, {
        messaging_product: "whatsapp",
        user_id: BSUID
      }])

      const first = yield* hub.blockUsers.list({ urlParams: { limit: 1 } })
      expect(first.data).toEqual([{ messaging_product: "whatsapp", wa_id: NUMBER }])
      const after = first.paging?.cursors?.after
      expect(after).toEqual(expect.any(String))
      const second = yield* hub.blockUsers.list({ urlParams: { limit: 1, after } })
      expect(second.data).toEqual([{ messaging_product: "whatsapp", user_id: BSUID }])

      const unblocked = yield* hub.blockUsers.unblock({ payload: { users: [NUMBER] } })
      expect(unblocked).toEqual({ removed_users: [{ input: NUMBER, wa_id: NUMBER }] })
      expect((yield* hub.blockUsers.list({ urlParams: {} })).data).toEqual([{
        messaging_product: "whatsapp",
        user_id: BSUID
      }])
    }))

  it.effect("an organization token names the instance by phone_number_id or instance_id; each number has its own list", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const other = yield* seedTenant()
      const org = yield* clientWith(tenant.orgToken)
      yield* org.blockUsers.block({ payload: { users: [NUMBER], phone_number_id: tenant.phoneNumberId } })
      const listed = yield* org.blockUsers.list({ urlParams: { instance_id: tenant.instanceId } })
      expect(listed.data).toEqual([{ messaging_product: "whatsapp", wa_id: NUMBER }])
      expect((yield* (yield* clientWith(other.instanceToken)).blockUsers.list({ urlParams: {} })).data).toEqual([])
      // Another organization's instance is unknown to this token.
      yield* refusedWith(org.blockUsers.list({ urlParams: { instance_id: other.instanceId } }), "NotFound")
    }))

  it.effect("an item that is neither a number nor a business-scoped user id is a 400 naming it, and nothing is blocked", () =>
    // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const refused = yield* blockUsers("POST", tenant.instanceToken, { users: [NUMBER, "hello", "12345", 42] })
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({ statusCode: 400, error: "validation_failed" })
      const details = refused.body.details as ReadonlyArray<{ field: string; message: string }>
      expect(details.map((d) => d.field)).toEqual(["users.1", "users.2", "users.3"])
      expect(details[0]?.message).toContain(`"hello" is neither a phone number`)
      expect(details[1]?.message).toContain(`"12345"`)
      expect(details[2]?.message).toContain("42")
      expect(itemsOf((yield* listBlocked(tenant.instanceToken)).body)).toEqual([])

      expect((yield* blockUsers("POST", tenant.instanceToken, { users: [] })).body).toMatchObject({
        details: [{ field: "users", message: "must hold at least one user" }]
      })
      const tooMany = yield* blockUsers("DELETE", tenant.instanceToken, {
        users: Array.from({ length: 1001 }, (_, i) => String(16505550000 + i))
      })
      expect(tooMany.body).toMatchObject({
        statusCode: 400,
        details: [{ field: "users", message: "must hold at most 1000 users" }]
      })
    }))

  it.effect("users refused one by one (999139100) are reported per user with 200; all refused is the upstream's 400", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const client = yield* clientWith(tenant.instanceToken)
      const partial = yield* client.blockUsers.block({
        payload: { users: [NUMBER, "999139100123", "US.999139100ABC"] }
      })
      expect(partial).toEqual({
        added_users: [{ input: NUMBER, wa_id: NUMBER }],
        failed_users: [
          {
            input: "999139100123",
            wa_id: "999139100123",
            code: 139100,
            message: "(#139100) Failed to block/unblock users",
            details: "Sandbox: forced block failure for this user"
          },
          {
            input: "US.999139100ABC",
            user_id: "US.999139100ABC",
            code: 139100,
            message: "(#139100) Failed to block/unblock users",
            details: "Sandbox: forced block failure for this user"
          }
        ]
      })
      expect((yield* client.blockUsers.list({ urlParams: {} })).data).toEqual([{
        messaging_product: "whatsapp",
        wa_id: NUMBER
      }])

      const none = yield* refusedWith(client.blockUsers.unblock({ payload: { users: ["999139100123"] } }), "BadRequest")
      expect(none).toMatchObject({
        statusCode: 400,
        message: "(#139100) Failed to block/unblock users",
        error: "block_users_failed",
        details: { upstream: { code: 139100 }, failed_users: [{ input: "999139100123", code: 139100 }] }
      })
    }))

  it.effect("the sandbox's other reserved prefixes fail the whole call; no token is 401", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const client = yield* clientWith(tenant.instanceToken)
      const refused = yield* refusedWith(
        client.blockUsers.block({ payload: { users: [NUMBER, "999100123"] } }),
        "UpstreamFailure"
      )
      expect(refused.status).toBe(400)
      expect(refused).toMatchObject({ error: "upstream_error", details: { upstream: { code: 100 } } })
      expect((yield* client.blockUsers.list({ urlParams: {} })).data).toEqual([])

      // The refusal of no token is the edge's: raw.
      const hub = yield* TestHub
      for (const method of ["POST", "DELETE", "GET"]) {
        const anonymous = yield* hub.request(
          method,
          "/api/block-users",
          method === "GET" ? {} : { json: { users: [NUMBER] } }
        )
        expect(anonymous.status, method).toBe(401)
        expect(anonymous.body).toEqual({ statusCode: 401, message: "Unauthorized" })
      }
    }))
})

/** Meta's mixed answer (HTTP 400): the users taken and refused beside the 139100 error. */
const mixedAnswer = (
  taken: "added_users" | "removed_users",
  users: ReadonlyArray<unknown>,
  failed: ReadonlyArray<unknown>
) => ({
  status: 400,
  body: {
    messaging_product: "whatsapp",
    block_users: { [taken]: users, failed_users: failed },
    error: {
      message: "(#139100) Failed to block/unblock users",
      type: "OAuthException",
      code: 139100,
      error_data: { details: "Failed to block some users, see the block_users response list for details" },
      fbtrace_id: "AbCdEfGh"
    }
  }
})

layer(testHubOnFakeGraph())("block users on the Graph API", (it) => {
  it.effect("POST and DELETE send Meta's body (numbers as user without +, ids as user_id, other fields kept); GET passes its paging", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-block" })
      const blocked = yield* (yield* clientWith(tenant.orgToken)).blockUsers.block({
        payload: { users: [`+${NUMBER}`, "US.ENT.abc123"], instance_id: tenant.instanceId, reason: { note: "spam" } }
      })
      expect(blocked).toEqual({
        added_users: [{ input: NUMBER, wa_id: NUMBER }, { input: "US.ENT.abc123", user_id: "US.ENT.abc123" }]
      })
      const sent = yield* fake.lastRequest
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/block_users`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-block")
      expect(sent.json).toEqual({
        reason: { note: "spam" },
        messaging_product: "whatsapp",
        block_users: [{ user: NUMBER }, { user_id: "US.ENT.abc123" }]
      })

      const client = yield* clientWith(tenant.instanceToken)
      const unblocked = yield* client.blockUsers.unblock({ payload: { users: [NUMBER] } })
      expect(unblocked).toEqual({ removed_users: [{ input: NUMBER, wa_id: NUMBER }] })
      const deleted = yield* fake.lastRequest
      expect({ method: deleted.method, path: deleted.path, json: deleted.json }).toEqual({
        method: "DELETE",
        path: `/v23.0/${tenant.phoneNumberId}/block_users`,
        json: { messaging_product: "whatsapp", block_users: [{ user: NUMBER }] }
      })

      const page = {
        data: [{ messaging_product: "whatsapp", wa_id: NUMBER }, {
          messaging_product: "whatsapp",
          wa_id: "16505551235",
          user_id: BSUID
        }],
        paging: { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } }
      }
      yield* fake.respond({ method: "GET", path: `/${tenant.phoneNumberId}/block_users` }, { body: page })
      const listed = yield* client.blockUsers.list({
        urlParams: { limit: 2, after: "QVFIUmFmdGVy", before: "QVFIUmJlZm9yZQ" }
      })
      expect(listed).toEqual(page)
      expect((yield* fake.lastRequest).query).toEqual({ limit: "2", after: "QVFIUmFmdGVy", before: "QVFIUmJlZm9yZQ" })
    }))

  it.effect("a malformed item is a 400 naming it, and nothing is sent upstream", () =>
    // Invalid on purpose: the typed client would refuse to encode it, so it goes raw.
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const before = (yield* fake.requests).length
      const refused = yield* blockUsers("POST", tenant.instanceToken, { users: [NUMBER, "us.lowercase"] })
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({
        error: "validation_failed",
        details: [{ field: "users.1", message: expect.stringContaining(`"us.lowercase"`) }]
      })
      expect((yield* fake.requests).length).toBe(before)
    }))

  it.effect("Meta's mixed 139100 answer is a 200 listing each refused user; its error_data may list them too", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond(
        { method: "POST", path: `/${tenant.phoneNumberId}/block_users` },
        mixedAnswer(
          "added_users",
          [{ input: NUMBER, wa_id: NUMBER }],
          [{
            input: "16505550000",
            errors: [{
              message: "Re-engagement required",
              code: "131047",
              error_data: { details: "User has not messaged in the last 24 hours" }
            }]
          }]
        )
      )
      const client = yield* clientWith(tenant.instanceToken)
      const partial = yield* client.blockUsers.block({ payload: { users: [NUMBER, "16505550000"] } })
      expect(partial).toEqual({
        added_users: [{ input: NUMBER, wa_id: NUMBER }],
        failed_users: [{
          input: "16505550000",
          code: 131047,
          message: "Re-engagement required",
          details: "User has not messaged in the last 24 hours"
        }]
      })

      yield* fake.respond({ method: "DELETE", path: `/${tenant.phoneNumberId}/block_users` }, {
        status: 400,
        body: {
          error: {
            message: "(#139100) Failed to block/unblock users",
            code: 139100,
            error_data: {
              details: "Failed to unblock some users",
              block_users: {
                removed_users: [{ input: NUMBER, wa_id: NUMBER }],
                failed_users: [{ input: BSUID, user_id: BSUID, errors: [{ message: "Unknown user", code: 100 }] }]
              }
            }
          }
        }
      })
      const viaErrorData = yield* client.blockUsers.unblock({ payload: { users: [NUMBER, BSUID] } })
      expect(viaErrorData).toEqual({
        removed_users: [{ input: NUMBER, wa_id: NUMBER }],
        failed_users: [{ input: BSUID, user_id: BSUID, code: 100, message: "Unknown user" }]
      })
    }))

  it.effect("every user refused, or any other Graph error, is the upstream's error through the usual mapping", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond(
        { method: "POST", path: `/${tenant.phoneNumberId}/block_users` },
        mixedAnswer(
          "added_users",
          [],
          [{ input: NUMBER, wa_id: NUMBER, errors: [{ message: "Re-engagement required", code: 131047 }] }]
        )
      )
      const client = yield* clientWith(tenant.instanceToken)
      const none = yield* refusedWith(client.blockUsers.block({ payload: { users: [NUMBER] } }), "BadRequest")
      expect({ statusCode: none.statusCode, message: none.message, error: none.error, details: none.details }).toEqual({
        statusCode: 400,
        message: "(#139100) Failed to block/unblock users",
        error: "block_users_failed",
        details: {
          upstream: {
            code: 139100,
            fbtrace_id: "AbCdEfGh",
            details: "Failed to block some users, see the block_users response list for details"
          },
          failed_users: [{ input: NUMBER, wa_id: NUMBER, code: 131047, message: "Re-engagement required" }]
        }
      })

      yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/block_users` }, {
        status: 400,
        body: { error: { message: "(#139101) Blocklist limit reached", code: 139101, fbtrace_id: "XyZ" } }
      })
      const full = yield* refusedWith(client.blockUsers.block({ payload: { users: [NUMBER] } }), "BadRequest")
      expect({ statusCode: full.statusCode, message: full.message, error: full.error, details: full.details }).toEqual({
        statusCode: 400,
        message: "(#139101) Blocklist limit reached",
        error: "block_users_failed",
        details: { upstream: { code: 139101, fbtrace_id: "XyZ" } }
      })
    }))
})

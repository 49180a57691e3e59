import { expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { TokensRepo } from "../src/Auth/Repo.js"
import { seedTenant, TestHub, testHub, itemsOf } from "./support/TestHub.js"
import { engines } from "./support/Databases.js"

const UNAUTHORIZED = { statusCode: 401, message: "Unauthorized" }

for (const engine of engines) layer(testHub({ engine }))(`api tokens (${engine})`, (it) => {
  it.effect("a session creates an organization token whose secret is shown once and works at once", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const created = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: { name: "ci" } })
      expect(created.status).toBe(201)
      expect(Object.keys(created.body).sort()).toEqual(["created_at", "id", "name", "token"])
      expect(created.body.name).toBe("ci")
      expect(String(created.body.token)).toMatch(/^mhk_[A-Za-z0-9_-]{43}$/)
      expect(Number.isNaN(Date.parse(String(created.body.created_at)))).toBe(false)

      const listed = yield* hub.request("GET", "/api/auth/api-tokens", { token: String(created.body.token) })
      expect(listed.status).toBe(200)
      expect(listed.text).not.toContain(String(created.body.token))
      expect(listed.body.data).toContainEqual(expect.objectContaining({ id: created.body.id, name: "ci", kind: "organization" }))
    }))

  it.effect("an instance token is created with instance_id and returned with it", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const created = yield* hub.request("POST", "/api/auth/api-tokens", {
        token: tenant.sessionToken,
        json: { name: "bot", instance_id: tenant.instanceId }
      })
      expect(created.status).toBe(201)
      expect(created.body.instance_id).toBe(tenant.instanceId)
      const instances = yield* hub.request("GET", "/api/instances", { token: String(created.body.token) })
      expect(instances.status).toBe(403)
    }))

  it.effect("the database holds no plaintext secret or access token", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant({ accessToken: "EAAG-very-secret-upstream-token" })
      const created = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: { name: "x" } })
      const dump = JSON.stringify([
        yield* sql`SELECT * FROM api_tokens`,
        yield* sql`SELECT * FROM sessions`,
        yield* sql`SELECT * FROM instances`
      ])
      for (const secret of [String(created.body.token), tenant.sessionToken, tenant.orgToken, tenant.instanceToken, "EAAG-very-secret-upstream-token"]) {
        expect(dump).not.toContain(secret)
      }
    }))

  it.effect("a revoked token is refused on its very next request, though it was cached", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const created = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: { name: "short-lived" } })
      const secret = String(created.body.token)
      expect((yield* hub.request("GET", "/api/instances", { token: secret })).status).toBe(200)
      const revoked = yield* hub.request("DELETE", `/api/auth/api-tokens/${created.body.id}`, { token: tenant.orgToken })
      expect(revoked.status).toBe(204)
      expect(revoked.text).toBe("")
      const after = yield* hub.request("GET", "/api/instances", { token: secret })
      expect(after.status).toBe(401)
      expect(after.body).toEqual(UNAUTHORIZED)
      const again = yield* hub.request("DELETE", `/api/auth/api-tokens/${created.body.id}`, { token: tenant.orgToken })
      expect(again.status).toBe(404)
      const listed = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      expect(listed.body.data).not.toContainEqual(expect.objectContaining({ id: created.body.id }))
    }))

  it.effect("missing, malformed, unknown and expired credentials are 401 with the exact body", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const tokens = yield* TokensRepo
      const expired = yield* tokens.createSession(tenant.organizationId, -1000)
      const cases = [
        {},
        { headers: { authorization: `Basic ${tenant.orgToken}` } },
        { headers: { authorization: "Bearer" } },
        { token: "mhk_unknownunknownunknownunknownunknownunkno" },
        { token: expired.secret }
      ]
      for (const options of cases) {
        const result = yield* hub.request("GET", "/api/auth/api-tokens", options)
        expect(result.status).toBe(401)
        expect(result.text).toBe(JSON.stringify(UNAUTHORIZED))
      }
    }))

  it.effect("token kinds: only a session creates tokens; instance tokens manage none", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const byOrg = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.orgToken, json: { name: "x" } })
      expect(byOrg.status).toBe(403)
      expect(byOrg.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      expect(String(byOrg.body.message)).toContain("session token")
      const byInstance = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.instanceToken })
      expect(byInstance.status).toBe(403)
      const revokeByInstance = yield* hub.request("DELETE", "/api/auth/api-tokens/tok_x", { token: tenant.instanceToken })
      expect(revokeByInstance.status).toBe(403)
    }))

  it.effect("another organization's instance and token are 404, never revealed", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const mine = yield* seedTenant()
      const theirs = yield* seedTenant()
      const created = yield* hub.request("POST", "/api/auth/api-tokens", {
        token: mine.sessionToken,
        json: { name: "steal", instance_id: theirs.instanceId }
      })
      expect(created.status).toBe(404)
      expect(created.body).toEqual({ statusCode: 404, message: `instance_id ${theirs.instanceId} was not found`, error: "not_found" })

      const theirTokens = yield* hub.request("GET", "/api/auth/api-tokens", { token: theirs.sessionToken })
      const theirTokenIds = itemsOf(theirTokens.body).map((t) => String(t.id))
      for (const id of theirTokenIds) {
        const revoke = yield* hub.request("DELETE", `/api/auth/api-tokens/${id}`, { token: mine.orgToken })
        expect(revoke.status).toBe(404)
      }
      expect((yield* hub.request("GET", "/api/instances", { token: theirs.orgToken })).status).toBe(200)
    }))

  it.effect("bad inputs name every failing field", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const both = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: { name: "  ", instance_id: 5 } })
      expect(both.status).toBe(400)
      expect(both.body).toMatchObject({ statusCode: 400, error: "validation_failed" })
      expect(both.body.details).toEqual([
        { field: "name", message: "must not be empty" },
        { field: "instance_id", message: "Expected string, actual 5" }
      ])
      const missing = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: {} })
      expect(missing.status).toBe(400)
      expect(missing.body.details).toEqual([{ field: "name", message: "is missing" }])
      const long = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: { name: "x".repeat(101) } })
      expect(long.body.details).toEqual([{ field: "name", message: "must be at most 100 characters" }])
      const malformed = yield* hub.request("POST", "/api/auth/api-tokens", {
        token: tenant.sessionToken,
        body: "{\"name\":",
        headers: { "content-type": "application/json" }
      })
      expect(malformed.status).toBe(400)
      expect(malformed.body).toEqual({ statusCode: 400, message: "Malformed request body: it is not valid JSON", error: "malformed_body" })
      const nothingWritten = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      expect(itemsOf(nothingWritten.body)).toHaveLength(2)
    }))
})

import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Option, Stream, TestClock } from "effect"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { type Credential, TokensRepo } from "../src/ApiTokens/Repo.js"
import { POLL_INTERVAL, RevocationFeed, RevocationFeedLive } from "../src/ApiTokens/RevocationFeed.js"
import { hashSecret } from "../src/ApiTokens/Secrets.js"
import { TokenResolver } from "../src/ApiTokens/TokenResolver.js"
import { OrganizationId } from "../src/Domain/Ids.js"
import { PgListener } from "../src/Sql/Notify.js"
import { engines } from "./support/Databases.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"

const UNAUTHORIZED = { statusCode: 401, message: "Unauthorized" }

for (const engine of engines) {
  layer(testHub({ engine }))(`api tokens (${engine})`, (it) => {
    it.effect("a session creates an organization token whose secret is shown once and works at once", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const created = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "ci" }
        })
        expect(created.status).toBe(201)
        expect(Object.keys(created.body).sort()).toEqual(["created_at", "id", "name", "token"])
        expect(created.body.name).toBe("ci")
        expect(String(created.body.token)).toMatch(/^mhk_[A-Za-z0-9_-]{43}$/)
        expect(Number.isNaN(Date.parse(String(created.body.created_at)))).toBe(false)

        const listed = yield* hub.request("GET", "/api/auth/api-tokens", { token: String(created.body.token) })
        expect(listed.status).toBe(200)
        expect(listed.text).not.toContain(String(created.body.token))
        expect(listed.body.data).toContainEqual(
          expect.objectContaining({ id: created.body.id, name: "ci", kind: "organization" })
        )
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
        const created = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "x" }
        })
        const dump = JSON.stringify([
          yield* sql`SELECT * FROM api_tokens`,
          yield* sql`SELECT * FROM sessions`,
          yield* sql`SELECT * FROM instances`
        ])
        for (
          const secret of [
            String(created.body.token),
            tenant.sessionToken,
            tenant.orgToken,
            tenant.instanceToken,
            "EAAG-very-secret-upstream-token"
          ]
        ) {
          expect(dump).not.toContain(secret)
        }
      }))

    it.effect("a revoked token is refused on its very next request, though it was cached", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const created = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "short-lived" }
        })
        const secret = String(created.body.token)
        expect((yield* hub.request("GET", "/api/instances", { token: secret })).status).toBe(200)
        const revoked = yield* hub.request("DELETE", `/api/auth/api-tokens/${created.body.id}`, {
          token: tenant.orgToken
        })
        expect(revoked.status).toBe(204)
        expect(revoked.text).toBe("")
        const after = yield* hub.request("GET", "/api/instances", { token: secret })
        expect(after.status).toBe(401)
        expect(after.body).toEqual(UNAUTHORIZED)
        const again = yield* hub.request("DELETE", `/api/auth/api-tokens/${created.body.id}`, {
          token: tenant.orgToken
        })
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
        const byOrg = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.orgToken,
          json: { name: "x" }
        })
        expect(byOrg.status).toBe(403)
        expect(byOrg.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
        expect(String(byOrg.body.message)).toContain("session token")
        const byInstance = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.instanceToken })
        expect(byInstance.status).toBe(403)
        const revokeByInstance = yield* hub.request("DELETE", "/api/auth/api-tokens/tok_x", {
          token: tenant.instanceToken
        })
        expect(revokeByInstance.status).toBe(403)
      }))

    it.effect("GET /api/auth/whoami tells each token its kind and scope; without a token it is 401", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const session = yield* hub.request("GET", "/api/auth/whoami", { token: tenant.sessionToken })
        expect(session.status).toBe(200)
        expect(session.body).toEqual({
          kind: "session",
          organization_id: tenant.organizationId,
          token_id: expect.any(String),
          expires_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/)
        })
        expect(Date.parse(String(session.body.expires_at))).toBeGreaterThan(Date.now())
        const organization = yield* hub.request("GET", "/api/auth/whoami", { token: tenant.orgToken })
        expect(organization.status).toBe(200)
        expect(organization.body).toEqual({
          kind: "organization",
          organization_id: tenant.organizationId,
          token_id: expect.stringMatching(/^tok_/)
        })
        const instance = yield* hub.request("GET", "/api/auth/whoami", { token: tenant.instanceToken })
        expect(instance.status).toBe(200)
        expect(instance.body).toEqual({
          kind: "instance",
          organization_id: tenant.organizationId,
          instance_id: tenant.instanceId,
          phone_number_id: tenant.phoneNumberId,
          token_id: expect.stringMatching(/^tok_/)
        })
        // The token ids are the ones the token list shows.
        const listed = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.orgToken })
        const ids = itemsOf(listed.body).map((token) => token.id)
        expect(ids).toEqual(expect.arrayContaining([organization.body.token_id, instance.body.token_id]))
        const anonymous = yield* hub.request("GET", "/api/auth/whoami")
        expect(anonymous.status).toBe(401)
        expect(anonymous.body).toEqual({ statusCode: 401, message: "Unauthorized" })
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
        expect(created.body).toEqual({
          statusCode: 404,
          message: `instance_id ${theirs.instanceId} was not found`,
          error: "not_found"
        })

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
        const both = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "  ", instance_id: 5 }
        })
        expect(both.status).toBe(400)
        expect(both.body).toMatchObject({ statusCode: 400, error: "validation_failed" })
        expect(both.body.details).toEqual([
          { field: "name", message: "must not be empty" },
          { field: "instance_id", message: "Expected string, actual 5" }
        ])
        const missing = yield* hub.request("POST", "/api/auth/api-tokens", { token: tenant.sessionToken, json: {} })
        expect(missing.status).toBe(400)
        expect(missing.body.details).toEqual([{ field: "name", message: "is missing" }])
        const long = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          json: { name: "x".repeat(101) }
        })
        expect(long.body.details).toEqual([{ field: "name", message: "must be at most 100 characters" }])
        const malformed = yield* hub.request("POST", "/api/auth/api-tokens", {
          token: tenant.sessionToken,
          body: "{\"name\":",
          headers: { "content-type": "application/json" }
        })
        expect(malformed.status).toBe(400)
        expect(malformed.body).toEqual({
          statusCode: 400,
          message: "Malformed request body: it is not valid JSON",
          error: "malformed_body"
        })
        const nothingWritten = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
        expect(itemsOf(nothingWritten.body)).toHaveLength(2)
      }))
  })
}

layer(testHub())("session revocation", (it) => {
  it.effect("DELETE /api/auth/session revokes the calling session at once, though it was cached; other sessions keep working", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tokens = yield* TokensRepo
      const tenant = yield* seedTenant()
      const other = yield* tokens.createSession(tenant.organizationId, 3_600_000)
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })).status).toBe(200)

      const revoked = yield* hub.request("DELETE", "/api/auth/session", { token: tenant.sessionToken })
      expect(revoked.status).toBe(204)
      expect(revoked.text).toBe("")
      const after = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      expect(after.status).toBe(401)
      expect(after.text).toBe(JSON.stringify(UNAUTHORIZED))
      expect((yield* hub.request("DELETE", "/api/auth/session", { token: tenant.sessionToken })).status).toBe(401)
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: other.secret })).status).toBe(200)
    }))

  it.effect("only session tokens may call it: api tokens are 403 and stay valid", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      for (const token of [tenant.orgToken, tenant.instanceToken]) {
        const refused = yield* hub.request("DELETE", "/api/auth/session", { token })
        expect(refused.status).toBe(403)
        expect(refused.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      }
      expect((yield* hub.request("GET", "/api/instances", { token: tenant.orgToken })).status).toBe(200)
      expect((yield* hub.request("DELETE", "/api/auth/session")).status).toBe(401)
    }))

  it.effect("revoking an organization's sessions leaves other organizations' and api tokens alone, and feeds every revocation", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tokens = yield* TokensRepo
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const stranger = yield* seedTenant()
      const second = yield* tokens.createSession(tenant.organizationId, 3_600_000)
      const expired = yield* tokens.createSession(tenant.organizationId, -1000)
      const before = yield* tokens.lastRevocation

      const hashes = yield* tokens.revokeOrganizationSessions(tenant.organizationId)
      expect([...hashes].sort()).toEqual([hashSecret(tenant.sessionToken), hashSecret(second.secret)].sort())
      expect(hashes).not.toContain(hashSecret(expired.secret))
      const fed = yield* tokens.revocationsAfter(before)
      expect(fed.map((row) => row.token_hash).sort()).toEqual([...hashes].sort())
      expect(yield* tokens.revokeOrganizationSessions(tenant.organizationId)).toEqual([])

      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: stranger.sessionToken })).status).toBe(200)
      expect((yield* hub.request("GET", "/api/instances", { token: tenant.orgToken })).status).toBe(200)
      const created = yield* hub.request("POST", "/api/auth/api-tokens", {
        token: stranger.sessionToken,
        json: { name: "x" }
      })
      const apiRevoked = yield* hub.request("DELETE", `/api/auth/api-tokens/${created.body.id}`, {
        token: stranger.orgToken
      })
      expect(apiRevoked.status).toBe(204)
      const feedRows = yield* sql<{ readonly token_hash: string }>`SELECT token_hash FROM revocations`
      expect(feedRows.map((row) => row.token_hash)).toContain(hashSecret(String(created.body.token)))
    }))
})

const main = join(import.meta.dirname, "..", "src", "main.ts")
const databaseFile = join(mkdtempSync(join(tmpdir(), "hub-revocation-")), "hub.sqlite")

/** Runs the `hub` command line in its own process on the test hub's database. */
const hubCli = (...args: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    const child = Bun.spawn([process.execPath, main, ...args], {
      env: { ...process.env, HUB_DB: databaseFile, HUB_LOG_LEVEL: "warning" },
      stdout: "pipe",
      stderr: "pipe"
    })
    const [exitCode, stdout, stderr] = await Promise.all([
      child.exited,
      new Response(child.stdout).text(),
      new Response(child.stderr).text()
    ])
    return { exitCode, stdout, stderr }
  })

// The test clock drives the feed's poll: nothing here waits on real time but the CLI's own process.
layer(testHub({ databaseFile }), { timeout: 60_000 })("revocation by another process", (it) => {
  it.effect("hub session revoke --org, run by the CLI, is refused by the serving hub at its next poll of the feed", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const feed = yield* RevocationFeed
      const tokens = yield* TokensRepo
      const tenant = yield* seedTenant()
      const untouched = yield* seedTenant()
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })).status).toBe(200)
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: untouched.sessionToken })).status).toBe(200)

      const revoked = yield* hubCli("session", "revoke", "--org", tenant.organizationId)
      expect(revoked.stderr).toBe("")
      expect(revoked.exitCode).toBe(0)
      expect(JSON.parse(revoked.stdout)).toEqual({ revoked: 1 })
      // This process has not read the feed yet: its cache still admits the session.
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })).status).toBe(200)

      const revocation = yield* tokens.lastRevocation
      const polled = yield* Effect.fork(
        feed.position.changes.pipe(Stream.filter((seq) => seq >= revocation), Stream.runHead)
      )
      yield* TestClock.adjust(POLL_INTERVAL)
      yield* Fiber.join(polled)

      const after = yield* hub.request("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      expect(after.status).toBe(401)
      expect(after.text).toBe(JSON.stringify(UNAUTHORIZED))
      expect((yield* hub.request("GET", "/api/auth/api-tokens", { token: untouched.sessionToken })).status).toBe(200)
      expect(JSON.parse((yield* hubCli("session", "revoke", "--org", tenant.organizationId)).stdout)).toEqual({
        revoked: 0
      })
      expect((yield* hubCli("session", "revoke", "--org", "org_nope")).stderr).toContain(
        "organization org_nope was not found"
      )
    }))
})

describe("the credential cache and revocation", () => {
  const secret = "mhs_race-race-race-race-race-race-race-race-rac"
  const credential: Credential = {
    kind: "session",
    credentialId: "ses_race",
    organizationId: OrganizationId.make("org_race"),
    instance: undefined,
    expiresAt: Date.now() + 3_600_000
  }

  plain.effect(
    "a lookup that began before a revocation does not put the token back into the cache after it",
    () =>
      Effect.gen(function*() {
        const release = yield* Deferred.make<void>()
        const bothReading = yield* Deferred.make<void>()
        let revoked = false
        let reads = 0
        // The database as the lookups see it: the first two read the session live, then wait for the release.
        const findCredential = () =>
          Effect.gen(function*() {
            const live = !revoked
            reads++
            if (reads <= 2) {
              if (reads === 2) yield* Deferred.succeed(bothReading, undefined)
              yield* Deferred.await(release)
            }
            return live ? Option.some(credential) : Option.none()
          })
        const repo = TokensRepo.of({
          createApiToken: () => Effect.die("unused"),
          listApiTokens: () => Effect.die("unused"),
          findApiToken: () => Effect.die("unused"),
          revokeApiToken: () => Effect.die("unused"),
          revokeSession: () => Effect.die("unused"),
          revokeOrganizationSessions: () => Effect.die("unused"),
          createSession: () => Effect.die("unused"),
          lastRevocation: Effect.die("unused"),
          revocationsAfter: () => Effect.die("unused"),
          pruneRevocations: () => Effect.die("unused"),
          touchApiToken: () => Effect.void,
          findCredential
        })
        const resolver = yield* Effect.provide(
          TokenResolver,
          TokenResolver.DefaultWithoutDependencies.pipe(
            Layer.provide(Layer.merge(Layer.succeed(TokensRepo, repo), PgListener.None))
          )
        )

        const lookups = yield* Effect.fork(
          Effect.all([resolver.resolve(secret), resolver.resolve(secret)], { concurrency: "unbounded" })
        )
        yield* Deferred.await(bothReading)
        // The revocation commits and is forgotten while both lookups are still reading.
        revoked = true
        yield* resolver.forget(hashSecret(secret))
        yield* Deferred.succeed(release, undefined)
        // They began before it, so they may answer as the database did when they read it…
        const answers = yield* Fiber.join(lookups)
        expect(answers.map((principal) => principal.credentialId)).toEqual(["ses_race", "ses_race"])
        // …but neither left the token in the cache: the next request reads the database and is refused.
        expect(resolver.resolveNow(secret)).toBeUndefined()
        const next = yield* Effect.either(resolver.resolve(secret))
        expect(Either.isLeft(next)).toBe(true)
        expect(reads).toBe(3)
      })
  )
})

describe("the revocation feed", () => {
  plain.effect(
    "a revocation committed under a lower number after a read passed it is still evicted, once",
    () =>
      Effect.gen(function*() {
        // The feed's table as the reads see it: on PostgreSQL a transaction that took number 2 may commit after 3 was read.
        const rows: Array<{ readonly seq: number; readonly token_hash: string }> = [{ seq: 1, token_hash: "h1" }]
        const forgotten: Array<string> = []
        const die = () => Effect.die("unused")
        const repo = TokensRepo.of({
          createApiToken: die,
          listApiTokens: die,
          findApiToken: die,
          revokeApiToken: die,
          revokeSession: die,
          revokeOrganizationSessions: die,
          createSession: die,
          findCredential: die,
          touchApiToken: () => Effect.void,
          lastRevocation: Effect.succeed(1),
          revocationsAfter: (seq) =>
            Effect.sync(() => rows.filter((row) => row.seq > seq).sort((a, b) => a.seq - b.seq)),
          pruneRevocations: () => Effect.void
        })
        const resolver = TokenResolver.make({
          resolve: die,
          resolveNow: () => undefined,
          forget: (...hashes) => Effect.sync(() => forgotten.push(...hashes)),
          watch: () => () => {}
        })
        const feed = yield* Effect.provide(
          RevocationFeed,
          RevocationFeedLive.pipe(
            Layer.provide(Layer.mergeAll(Layer.succeed(TokensRepo, repo), Layer.succeed(TokenResolver, resolver)))
          )
        )
        rows.push({ seq: 3, token_hash: "h3" })
        yield* feed.poll
        rows.push({ seq: 2, token_hash: "h2" })
        yield* feed.poll
        yield* feed.poll
        // h1 was committed before the feed started (nothing cached then); h2 arrived behind the position.
        expect(forgotten.filter((hash) => hash !== "h1")).toEqual(["h3", "h2"])
      })
  )
})

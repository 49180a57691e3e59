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
import { errorBody } from "../src/Domain/Errors.js"
import { OrganizationId } from "../src/Domain/Ids.js"
import { PgListener } from "../src/Sql/Notify.js"
import { engines } from "./support/Databases.js"
import { refusedWith } from "./support/Refusal.js"
import { type RequestOptions, seedTenant, TestHub, testHub } from "./support/TestHub.js"

const UNAUTHORIZED = { statusCode: 401, message: "Unauthorized" }

const clientWith = (token?: string) => Effect.flatMap(TestHub, (hub) => hub.client(token))

/** A new api token made by the session: its id and secret. */
const createToken = (sessionToken: string, payload: { readonly name: string; readonly instance_id?: string }) =>
  Effect.flatMap(clientWith(sessionToken), (client) => client.apiTokens.create({ payload }))

/** The organization's api tokens as `token` lists them. */
const listTokens = (token: string) =>
  Effect.map(Effect.flatMap(clientWith(token), (client) => client.apiTokens.list()), (list) => list.data)

/**
 * A 401 checked raw, to its exact bytes: the edge's refusal is `{"statusCode":401,"message":"Unauthorized"}`
 * and nothing more (the typed client would decode a body with more in it to the same error).
 */
const expectUnauthorized = (method: string, path: string, options: RequestOptions = {}) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const answer = yield* hub.request(method, path, options)
    expect(answer.status).toBe(401)
    expect(answer.text).toBe(JSON.stringify(UNAUTHORIZED))
  })

for (const engine of engines) {
  layer(testHub({ engine }))(`api tokens (${engine})`, (it) => {
    it.effect("a session creates an organization token whose secret is shown once and works at once", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        // 201 and no key beyond these: the answer is checked against the document, whose ApiTokenCreated allows none.
        const created = yield* createToken(tenant.sessionToken, { name: "ci" })
        expect(Object.keys(created).sort()).toEqual(["created_at", "id", "name", "token"])
        expect(created.name).toBe("ci")
        expect(created.token).toMatch(/^mhk_[A-Za-z0-9_-]{43}$/)
        expect(Number.isNaN(Date.parse(created.created_at))).toBe(false)

        const listed = yield* listTokens(created.token)
        expect(JSON.stringify(listed)).not.toContain(created.token)
        expect(listed).toContainEqual(expect.objectContaining({ id: created.id, name: "ci", kind: "organization" }))
      }))

    it.effect("an instance token is created with instance_id and returned with it", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const created = yield* createToken(tenant.sessionToken, { name: "bot", instance_id: tenant.instanceId })
        expect(created.instance_id).toBe(tenant.instanceId)
        const instances = yield* refusedWith((yield* clientWith(created.token)).instances.list(), "Forbidden")
        expect(instances.error).toBe("forbidden_token_kind")
      }))

    it.effect("the database holds no plaintext secret or access token", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant({ accessToken: "EAAG-very-secret-upstream-token" })
        const created = yield* createToken(tenant.sessionToken, { name: "x" })
        const dump = JSON.stringify([
          yield* sql`SELECT * FROM api_tokens`,
          yield* sql`SELECT * FROM sessions`,
          yield* sql`SELECT * FROM instances`
        ])
        for (
          const secret of [
            created.token,
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
        const tenant = yield* seedTenant()
        const created = yield* createToken(tenant.sessionToken, { name: "short-lived" })
        yield* (yield* clientWith(created.token)).instances.list()
        // A 204 without a body: the document check refuses any other answer (its 204 has no content).
        const byOrg = yield* clientWith(tenant.orgToken)
        yield* byOrg.apiTokens.revoke({ path: { tokenId: created.id } })
        yield* expectUnauthorized("GET", "/api/instances", { token: created.token })
        yield* refusedWith(byOrg.apiTokens.revoke({ path: { tokenId: created.id } }), "NotFound")
        expect(yield* listTokens(tenant.sessionToken)).not.toContainEqual(expect.objectContaining({ id: created.id }))
      }))

    describe("raw requests: the edge's refusals as sent", () => {
      // Raw: credentials the typed client cannot send (none, Basic, a bare Bearer), and the 401's exact bytes.
      it.effect("missing, malformed, unknown and expired credentials are 401 with the exact body", () =>
        Effect.gen(function*() {
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
            yield* expectUnauthorized("GET", "/api/auth/api-tokens", options)
          }
        }))

      // Raw: the edge's refusals by token kind, as sent.
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
    })

    it.effect("GET /api/auth/whoami tells each token its kind and scope; without a token it is 401", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const whoami = (token: string) => Effect.flatMap(clientWith(token), (client) => client.apiTokens.whoami())
        const session = yield* whoami(tenant.sessionToken)
        expect(session).toEqual({
          kind: "session",
          organization_id: tenant.organizationId,
          token_id: expect.any(String),
          expires_at: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T/)
        })
        expect(Date.parse(String(session.expires_at))).toBeGreaterThan(Date.now())
        const organization = yield* whoami(tenant.orgToken)
        expect(organization).toEqual({
          kind: "organization",
          organization_id: tenant.organizationId,
          token_id: expect.stringMatching(/^tok_/)
        })
        const instance = yield* whoami(tenant.instanceToken)
        expect(instance).toEqual({
          kind: "instance",
          organization_id: tenant.organizationId,
          instance_id: tenant.instanceId,
          phone_number_id: tenant.phoneNumberId,
          token_id: expect.stringMatching(/^tok_/)
        })
        // The token ids are the ones the token list shows.
        const ids = (yield* listTokens(tenant.orgToken)).map((token) => token.id)
        expect(ids).toEqual(expect.arrayContaining([organization.token_id, instance.token_id]))
        yield* expectUnauthorized("GET", "/api/auth/whoami")
      }))

    it.effect("another organization's instance and token are 404, never revealed", () =>
      Effect.gen(function*() {
        const mine = yield* seedTenant()
        const theirs = yield* seedTenant()
        const created = yield* refusedWith(
          createToken(mine.sessionToken, { name: "steal", instance_id: theirs.instanceId }),
          "NotFound"
        )
        expect(errorBody(created)).toEqual({
          statusCode: 404,
          message: `instance_id ${theirs.instanceId} was not found`,
          error: "not_found"
        })

        const byMine = yield* clientWith(mine.orgToken)
        for (const { id } of yield* listTokens(theirs.sessionToken)) {
          yield* refusedWith(byMine.apiTokens.revoke({ path: { tokenId: id } }), "NotFound")
        }
        expect(yield* listTokens(theirs.sessionToken)).toHaveLength(2)
        yield* (yield* clientWith(theirs.orgToken)).instances.list()
      }))

    describe("raw requests: bodies the typed client refuses to encode or cannot send", () => {
      // Raw: invalid and malformed bodies, which the typed client refuses to encode or cannot send.
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
          expect(yield* listTokens(tenant.sessionToken)).toHaveLength(2)
        }))
    })
  })
}

layer(testHub())("session revocation", (it) => {
  it.effect("DELETE /api/auth/session revokes the calling session at once, though it was cached; other sessions keep working", () =>
    Effect.gen(function*() {
      const tokens = yield* TokensRepo
      const tenant = yield* seedTenant()
      const other = yield* tokens.createSession(tenant.organizationId, 3_600_000)
      yield* listTokens(tenant.sessionToken)

      // A 204 without a body: the document check refuses any other answer (its 204 has no content).
      const session = yield* clientWith(tenant.sessionToken)
      yield* session.apiTokens.revokeSession()
      yield* expectUnauthorized("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      yield* refusedWith(session.apiTokens.revokeSession(), "Unauthorized")
      yield* listTokens(other.secret)
    }))

  describe("raw requests: the edge's refusals by token kind", () => {
    // Raw: the edge's refusals by token kind, as sent.
    it.effect("only session tokens may call it: api tokens are 403 and stay valid", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        for (const token of [tenant.orgToken, tenant.instanceToken]) {
          const refused = yield* hub.request("DELETE", "/api/auth/session", { token })
          expect(refused.status).toBe(403)
          expect(refused.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
        }
        yield* (yield* clientWith(tenant.orgToken)).instances.list()
        yield* expectUnauthorized("DELETE", "/api/auth/session")
      }))
  })

  it.effect("revoking an organization's sessions leaves other organizations' and api tokens alone, and feeds every revocation", () =>
    Effect.gen(function*() {
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

      yield* listTokens(stranger.sessionToken)
      yield* (yield* clientWith(tenant.orgToken)).instances.list()
      const created = yield* createToken(stranger.sessionToken, { name: "x" })
      yield* (yield* clientWith(stranger.orgToken)).apiTokens.revoke({ path: { tokenId: created.id } })
      const feedRows = yield* sql<{ readonly token_hash: string }>`SELECT token_hash FROM revocations`
      expect(feedRows.map((row) => row.token_hash)).toContain(hashSecret(created.token))
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
      const feed = yield* RevocationFeed
      const tokens = yield* TokensRepo
      const tenant = yield* seedTenant()
      const untouched = yield* seedTenant()
      yield* listTokens(tenant.sessionToken)
      yield* listTokens(untouched.sessionToken)

      const revoked = yield* hubCli("session", "revoke", "--org", tenant.organizationId)
      expect(revoked.stderr).toBe("")
      expect(revoked.exitCode).toBe(0)
      expect(JSON.parse(revoked.stdout)).toEqual({ revoked: 1 })
      // This process has not read the feed yet: its cache still admits the session.
      yield* listTokens(tenant.sessionToken)

      const revocation = yield* tokens.lastRevocation
      const polled = yield* Effect.fork(
        feed.position.changes.pipe(Stream.filter((seq) => seq >= revocation), Stream.runHead)
      )
      yield* TestClock.adjust(POLL_INTERVAL)
      yield* Fiber.join(polled)

      yield* expectUnauthorized("GET", "/api/auth/api-tokens", { token: tenant.sessionToken })
      yield* listTokens(untouched.sessionToken)
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

/**
 * A real hub for tests: the full HTTP server on 127.0.0.1 port 0, an in-memory SQLite database,
 * and helpers to call it and to seed tenancy. Every assertion goes through real HTTP.
 */
import { FetchHttpClient, HttpClient, HttpClientResponse, HttpServer } from "@effect/platform"
import { Context, Duration, Effect, Layer, Logger, LogLevel, Option, Redacted } from "effect"
import { TokensRepo } from "../../src/ApiTokens/Repo.js"
import { type HubClient, makeHubClient } from "../../src/Client.js"
import { hubConfigWith, type HubSettings } from "../../src/Config.js"
import type { InstanceId, OrganizationId } from "../../src/Domain/Ids.js"
import { hubServer } from "../../src/Edge/FastLane.js"
import { hubLayer } from "../../src/Http.js"
import { InstancesRepo } from "../../src/Instances/Repo.js"
import { type HostLookup, HostResolver } from "../../src/Net/UrlPolicy.js"
import { type Engine, testDatabaseUrl } from "./Databases.js"
import { expectDocumented } from "./OpenApiCheck.js"

export interface HttpResult {
  readonly status: number
  readonly headers: Headers
  /** The parsed JSON object body; empty when the body is not a JSON object. */
  readonly body: Readonly<Record<string, unknown>>
  readonly text: string
}

export interface RequestOptions {
  readonly token?: string
  readonly json?: unknown
  readonly body?: BodyInit
  readonly headers?: Record<string, string>
}

export class TestHub extends Context.Tag("TestHub")<TestHub, {
  readonly baseUrl: string
  /** A raw request: for tests of the wire and the edge (bodies, headers, refusals as sent). */
  readonly request: (method: string, path: string, options?: RequestOptions) => Effect.Effect<HttpResult>
  /** The typed client (src/Client.ts) with `token`, as a program would call the hub; every answer is checked against the document too. */
  readonly client: (token?: string) => Effect.Effect<HubClient>
}>() {}

/** fetch, with every answer checked against the OpenAPI document (its body read here, then handed on as it came). */
const documentedFetch = Layer.effect(
  HttpClient.HttpClient,
  Effect.map(
    HttpClient.HttpClient,
    (client) =>
      HttpClient.transformResponse(
        client,
        (answer) =>
          Effect.flatMap(answer, (response) =>
            Effect.flatMap(Effect.orDie(response.text), (text) => {
              const url = new URL(response.request.url)
              const headers = new Headers(response.headers)
              return Effect.as(
                Effect.promise(() =>
                  expectDocumented({
                    method: response.request.method,
                    url: url.pathname + url.search,
                    status: response.status,
                    headers,
                    text
                  })
                ),
                HttpClientResponse.fromWeb(response.request, new Response(text, { status: response.status, headers }))
              )
            }))
      )
  )
).pipe(Layer.provide(FetchHttpClient.layer))

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The array under `key` of an answer's body, its items as records: `[]` when it is not an array of objects. */
export const itemsOf = (
  body: Readonly<Record<string, unknown>>,
  key: string = "data"
): ReadonlyArray<Readonly<Record<string, unknown>>> => {
  const value = body[key]
  return Array.isArray(value) ? value.filter(isRecord) : []
}

export const parseObject = (text: string): Record<string, unknown> => {
  try {
    const parsed: unknown = JSON.parse(text)
    return isRecord(parsed) ? parsed : {}
  } catch {
    return {}
  }
}

export const TestHubLive = Layer.effect(
  TestHub,
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    const baseUrl = address._tag === "TcpAddress" ? `http://127.0.0.1:${address.port}` : "http://unix"
    return TestHub.of({
      baseUrl,
      client: (token) => makeHubClient({ baseUrl, token, httpClient: documentedFetch }),
      request: (method, path, options = {}) =>
        Effect.promise(async () => {
          const headers: Record<string, string> = { ...options.headers }
          if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
          let body = options.body
          if (options.json !== undefined) {
            headers["content-type"] ??= "application/json"
            body = JSON.stringify(options.json)
          }
          const response = await fetch(`${baseUrl}${path}`, {
            method,
            headers,
            ...(body === undefined ? {} : { body })
          })
          const text = await response.text()
          // Every answer must be what the OpenAPI document says (see OpenApiCheck.ts).
          await expectDocumented({ method, url: path, status: response.status, headers: response.headers, text })
          return { status: response.status, headers: response.headers, body: parseObject(text), text }
        })
    })
  })
)

/** A hub with test settings (in-memory database, sandbox upstream) merged with the given ones. */
/** A hub's settings in tests: the environment's, with these overrides and no memory target. */
export const testHubConfig = (settings: Partial<HubSettings>) =>
  // Many hubs share the test process, whose memory says nothing about any one of them. The upstream
  // payloads of the tests are Meta's examples and others' fixtures, of 2023-2025: a retention of a
  // century keeps them from being taken for replays older than the dedupe horizon (its own test sets one).
  hubConfigWith({ memoryTargetMb: 0, retention: TEST_RETENTION, ...settings })

/** See testHubConfig. */
export const TEST_RETENTION = Duration.days(36_500)

/** Settings of a test hub, and the engine its database runs on (SQLite unless told). */
export interface TestHubOptions extends Partial<HubSettings> {
  readonly engine?: Engine
  /** How webhook hosts resolve (the system's resolver unless given). */
  readonly hostLookup?: HostLookup
}

/** The key test hubs on PostgreSQL share (the sandbox's generated key lives beside a SQLite file). */
const TEST_SECRET_KEY = Redacted.make(new Uint8Array(32).fill(7))

/**
 * A hub on 127.0.0.1 port 0, on an in-memory SQLite database or, with `engine: "postgres"`, a fresh
 * database of its own on the run's PostgreSQL server (dropped when the layer is released).
 */
export const testHub = (
  options: TestHubOptions = {},
  logging: Layer.Layer<never> = Logger.minimumLogLevel(LogLevel.None)
) => {
  const { engine = "sqlite", hostLookup, ...settings } = options
  return Layer.unwrapScoped(Effect.map(testDatabaseUrl(engine), (databaseFile) =>
    TestHubLive.pipe(
      Layer.provideMerge(hubLayer(hubServer({ port: 0, hostname: "127.0.0.1" }))),
      Layer.provide(hostLookup === undefined ? HostResolver.System : Layer.succeed(HostResolver, hostLookup)),
      Layer.provideMerge(testHubConfig({
        databaseFile,
        ...(engine === "postgres" ? { secretKey: Option.some(TEST_SECRET_KEY) } : {}),
        ...settings
      })),
      Layer.provide(logging)
    )))
}

export interface Tenant {
  readonly organizationId: OrganizationId
  readonly instanceId: InstanceId
  readonly phoneNumberId: string
  readonly wabaId: string
  readonly sessionToken: string
  readonly orgToken: string
  readonly instanceToken: string
}

let tenantCounter = 0

/** A new organization with one instance and a token of each kind. */
export const seedTenant = (
  options: { readonly phoneNumberId?: string; readonly wabaId?: string; readonly accessToken?: string } = {}
) =>
  Effect.gen(function*() {
    const instances = yield* InstancesRepo
    const tokens = yield* TokensRepo
    tenantCounter++
    // The counter keeps ids apart within a process (a random part alone collided once a file seeded ~100 tenants).
    const phoneNumberId = options.phoneNumberId ??
      String(310000000000000 + tenantCounter * 1000 + Math.floor(Math.random() * 1000))
    const wabaId = options.wabaId ?? String(410000000000000 + tenantCounter * 1000 + Math.floor(Math.random() * 1000))
    const organization = yield* instances.createOrganization(`Tenant ${tenantCounter}`)
    const instance = yield* instances.createInstance({
      organizationId: organization.id,
      name: `Instance ${tenantCounter}`,
      phoneNumberId,
      wabaId,
      accessToken: Option.some(options.accessToken ?? `access-token-${tenantCounter}`)
    }).pipe(Effect.orDie)
    const session = yield* tokens.createSession(organization.id, 3_600_000)
    const orgToken = yield* tokens.createApiToken({
      organizationId: organization.id,
      instanceId: undefined,
      name: "org"
    })
    const instanceToken = yield* tokens.createApiToken({
      organizationId: organization.id,
      instanceId: instance.id,
      name: "instance"
    })
    return {
      organizationId: organization.id,
      instanceId: instance.id,
      phoneNumberId,
      wabaId,
      sessionToken: session.secret,
      orgToken: orgToken.secret,
      instanceToken: instanceToken.secret
    } satisfies Tenant
  })

/** A webhook of the tenant's instance for `url`, created through the API: its id and signing secret. */
export const createWebhook = (tenant: Tenant, url: string) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const created = yield* hub.request("POST", "/api/webhooks", {
      token: tenant.instanceToken,
      json: { url, name: "receiver" }
    })
    if (created.status !== 201) {
      return yield* Effect.dieMessage(`creating a webhook answered ${created.status}: ${JSON.stringify(created.body)}`)
    }
    return { id: String(created.body.id), secret: String(created.body.secret) }
  })

/** The id of a new webhook of the tenant's instance for `url`. */
export const createWebhookId = (tenant: Tenant, url: string) =>
  Effect.map(createWebhook(tenant, url), (webhook) => webhook.id)

/** A second instance (and an instance token for it) in the tenant's organization and business account. */
export const addInstance = (tenant: Tenant) =>
  Effect.gen(function*() {
    const instances = yield* InstancesRepo
    const tokens = yield* TokensRepo
    const suffix = String(Math.floor(Math.random() * 1e9)).padStart(9, "0")
    const instance = yield* instances.createInstance({
      organizationId: tenant.organizationId,
      name: "Second number",
      phoneNumberId: `32${suffix}`,
      wabaId: tenant.wabaId,
      accessToken: Option.some("access-token-second")
    }).pipe(Effect.orDie)
    const token = yield* tokens.createApiToken({
      organizationId: tenant.organizationId,
      instanceId: instance.id,
      name: "second"
    })
    return {
      instanceId: instance.id,
      organizationId: tenant.organizationId,
      phoneNumberId: instance.phone_number_id,
      instanceToken: token.secret
    }
  })

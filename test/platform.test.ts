import { HttpApi, HttpApiBuilder, HttpApiEndpoint, HttpApiGroup, HttpServer } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import { HubApi } from "../src/Api.js"
import { acceptedKinds, endpointPoliciesOf, policiesOf } from "../src/Domain/Access.js"
import { Authentication } from "../src/Domain/Authentication.js"
import { edge } from "../src/Edge/Middleware.js"
import { TestHub, testHub } from "./support/TestHub.js"

layer(testHub())("platform endpoints", (it) => {
  it.effect("GET /health and GET /ready answer without a token", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const health = yield* hub.request("GET", "/health")
      expect(health.status).toBe(200)
      expect(health.body).toEqual({ status: "ok" })
      expect(health.headers.get("x-request-id")).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/)
      const ready = yield* hub.request("GET", "/ready")
      expect(ready.status).toBe(200)
      expect(ready.body).toEqual({ status: "ready", database: "ok" })
    }))

  it.effect("a caller's request id is echoed back", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const health = yield* hub.request("GET", "/health", { headers: { "x-request-id": "trace-42" } })
      expect(health.headers.get("x-request-id")).toBe("trace-42")
    }))

  it.effect("unknown routes are a 404 JSON error", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const missing = yield* hub.request("GET", "/api/nothing-here?x=1")
      expect(missing.status).toBe(404)
      expect(missing.body).toEqual({
        statusCode: 404,
        message: "No route for GET /api/nothing-here",
        error: "route_not_found"
      })
    }))

  it.effect("OpenAPI and Swagger UI are served, the UI without any outside asset", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const spec = yield* hub.request("GET", "/openapi.json")
      expect(spec.status).toBe(200)
      expect(spec.body.openapi).toMatch(/^3\./)
      expect(Object.keys(spec.body.paths ?? {})).toEqual(
        expect.arrayContaining(["/api/auth/api-tokens", "/api/instances", "/health"])
      )
      const docs = yield* hub.request("GET", "/docs")
      expect(docs.status).toBe(200)
      expect(docs.headers.get("content-type")).toContain("text/html")
      expect(docs.text).toContain("SwaggerUIBundle")
      expect(docs.text).not.toMatch(/<script[^>]+src=["']https?:/)
      expect(docs.text).not.toMatch(/<link[^>]+href=["']https?:/)
      // The dashboard's security headers, its policy allowing exactly the page's own inline script and style.
      const dashboard = yield* Effect.promise(() => fetch(`${hub.baseUrl}/dashboard`))
      for (const header of ["x-content-type-options", "referrer-policy", "x-frame-options"]) {
        expect(docs.headers.get(header), header).toBe(dashboard.headers.get(header))
      }
      const hashOf = (block: string | undefined) =>
        `'sha256-${createHash("sha256").update(block ?? "").digest("base64")}'`
      const script = /<script>([\s\S]*?)<\/script>/.exec(docs.text)?.[1]
      const style = /<style>([\s\S]*?)<\/style>/.exec(docs.text)?.[1]
      expect(docs.headers.get("content-security-policy")).toBe(
        (dashboard.headers.get("content-security-policy") ?? "").replace(
          "script-src 'self'",
          `script-src ${hashOf(script)}`
        ).replace("style-src 'self'", `style-src ${hashOf(style)}`)
      )
      expect(docs.headers.get("content-security-policy")).toContain("default-src 'none'")
    }))
})

it("every endpoint behind the Authentication middleware names the token kinds it accepts, and only those do", () => {
  const authenticated: Array<string> = []
  const annotated: Array<string> = []
  HttpApi.reflect(HubApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations, middleware }) => {
      if ([...middleware].some((m) => m.key === Authentication.key)) {
        authenticated.push(`${endpoint.method} ${endpoint.path}`)
      }
      const kinds = acceptedKinds(mergedAnnotations)
      if (kinds !== undefined && kinds.length > 0) annotated.push(`${endpoint.method} ${endpoint.path}`)
    }
  })
  expect(authenticated.length).toBeGreaterThan(40)
  expect([...authenticated].sort()).toEqual([...annotated].sort())
})

/** A tiny API with a handler that dies, served with the hub's error renderer. */
class Failing extends HttpApiGroup.make("failing")
  .add(HttpApiEndpoint.get("boom", "/boom").addSuccess(Schema.String))
{}
class FailingApi extends HttpApi.make("failing").add(Failing) {}
const FailingLive = HttpApiBuilder.group(
  FailingApi,
  "failing",
  (handlers) => handlers.handle("boom", () => Effect.die(new Error("secret stack detail")))
)

it.scoped("a defect is a bare 500 without stack trace or message detail", () =>
  Effect.gen(function*() {
    const server = yield* Layer.build(
      HttpApiBuilder.serve().pipe(
        Layer.provide(HttpApiBuilder.middleware(edge(false, endpointPoliciesOf(policiesOf(FailingApi))))),
        Layer.provide(HttpApiBuilder.api(FailingApi).pipe(Layer.provide(FailingLive))),
        Layer.provideMerge(BunHttpServer.layer({ port: 0, hostname: "127.0.0.1" }))
      )
    )
    const address = (yield* Effect.provide(HttpServer.HttpServer, server)).address
    const port = address._tag === "TcpAddress" ? address.port : 0
    const response = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/boom`))
    const text = yield* Effect.promise(() => response.text())
    expect(response.status).toBe(500)
    expect(JSON.parse(text)).toEqual({ statusCode: 500, message: "Internal Server Error" })
    expect(text).not.toContain("secret stack detail")
  }))

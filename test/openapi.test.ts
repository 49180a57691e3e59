/**
 * The OpenAPI document: what it promises (one ErrorBody for every error, Retry-After on 429, a
 * summary and the accepted token kinds on every operation, the package's version), that its request
 * examples work as they are, and that the check every test's answers go through (OpenApiCheck.ts)
 * refuses an answer the document does not allow.
 */
import { HttpApi } from "@effect/platform"
import { describe, expect, it, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import packageJson from "../package.json" with { type: "json" }
import { HubApi } from "../src/Api.js"
import { policiesOf } from "../src/Domain/Access.js"
import { accessText } from "../src/Domain/Documented.js"
import { expectDocumented, hubDocument } from "./support/OpenApiCheck.js"
import { type RequestOptions, seedTenant, TestHub, testHub } from "./support/TestHub.js"

type Json = Record<string, unknown>
const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

const document = hubDocument()

/** Every operation of the document: method, path as documented (`{id}`), and the operation. */
/** Every endpoint of HubApi with the token kinds and body limit its annotations give it. */
const policies = policiesOf(HubApi)

const operations = Object.entries(isRecord(document.paths) ? document.paths : {}).flatMap(([path, item]) =>
  Object.entries(isRecord(item) ? item : {}).flatMap(([method, operation]) =>
    isRecord(operation) ? [{ method: method.toUpperCase(), path, operation }] : []
  )
)

const responsesOf = (operation: Json) => Object.entries(isRecord(operation.responses) ? operation.responses : {})

describe("the OpenAPI document", () => {
  it("names the package's version and a server", () => {
    expect(document.info).toMatchObject({ title: "Messaging Hub", version: packageJson.version })
    expect(document.servers).toEqual([{ url: "/", description: "This hub" }])
  })

  it("documents every error answer as the one ErrorBody, and Retry-After on every 429", () => {
    const components = isRecord(document.components) && isRecord(document.components.schemas)
      ? document.components.schemas
      : {}
    expect(components.ErrorBody).toMatchObject({
      type: "object",
      required: ["statusCode", "message"],
      properties: { statusCode: { type: "integer" }, message: { type: "string" }, error: { type: "string" } }
    })
    let errors = 0
    for (const { method, path, operation } of operations) {
      for (const [status, response] of responsesOf(operation)) {
        if (Number(status) < 400) continue
        errors++
        expect(response, `${method} ${path} ${status}`).toMatchObject({
          description: expect.any(String),
          content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorBody" } } }
        })
        if (status === "429") {
          expect(response, `${method} ${path}`).toMatchObject({
            headers: { "Retry-After": { required: true, schema: { type: "integer" } } }
          })
        }
      }
      // Every operation may fail with a validation error or a defect.
      expect(responsesOf(operation).map(([status]) => status), `${method} ${path}`).toEqual(
        expect.arrayContaining(["400", "500"])
      )
    }
    expect(errors).toBeGreaterThan(100)
    // Effect's own error encoding (`_tag`, `issues`) appears nowhere.
    expect(JSON.stringify(document)).not.toMatch(/"_tag"|HttpApiDecodeError/)
  })

  it("says what each operation does and which token kinds it accepts, from the endpoint's own annotation", () => {
    const seen = new Map<string, string>()
    HttpApi.reflect(HubApi, {
      onGroup: () => {},
      onEndpoint: ({ endpoint, mergedAnnotations }) => {
        const path = endpoint.path.replace(/:(\w+)/g, "{$1}")
        const found = operations.find((o) => o.method === endpoint.method && o.path === path)
        expect(found?.operation.summary, `${endpoint.method} ${path}`).toMatch(/\w/)
        expect(found?.operation.description, `${endpoint.method} ${path}`).toEqual(
          expect.stringContaining(accessText(mergedAnnotations))
        )
        seen.set(`${endpoint.method} ${endpoint.path}`, accessText(mergedAnnotations))
      }
    })
    expect(seen.size).toBe(operations.length)
    expect(seen.get("POST /api/messages")).toBe(
      "Accepts an organization token or an instance token as `Authorization: Bearer <token>`."
    )
    expect(seen.get("POST /api/auth/api-tokens")).toBe(
      "Accepts a session token (from `hub session create`) as `Authorization: Bearer <token>`."
    )
    expect(seen.get("GET /metrics")).toMatch(/^Takes no api token: when the hub sets HUB_METRICS_TOKEN/)
    expect(seen.get("GET /health")).toBe("Needs no Bearer token.")
  })

  it("gives every JSON request body an example", () => {
    for (const { method, path, operation } of operations) {
      const content = isRecord(operation.requestBody) && isRecord(operation.requestBody.content)
        ? operation.requestBody.content
        : {}
      if ("application/json" in content) {
        expect(content["application/json"], `${method} ${path}`).toHaveProperty("example")
      }
    }
  })
})

describe("the check every answer goes through", () => {
  const answer = (
    method: string,
    url: string,
    status: number,
    body: unknown,
    headers: Record<string, string> = {}
  ) => ({
    method,
    url,
    status,
    headers: new Headers({ "content-type": "application/json", ...headers }),
    text: JSON.stringify(body)
  })

  it("accepts what the document allows", async () => {
    await expectDocumented(
      answer("GET", "/api/webhooks/wh_1", 404, {
        statusCode: 404,
        message: "webhook wh_1 was not found",
        error: "not_found"
      })
    )
    await expectDocumented(
      answer("POST", "/api/messages", 429, { statusCode: 429, message: "slow down", error: "rate_limited" }, {
        "retry-after": "2"
      })
    )
    await expectDocumented(
      answer("GET", "/no/such/route?x=1", 404, { statusCode: 404, message: "No route for GET /no/such/route" })
    )
  })

  it("refuses an error body in Effect's own encoding, an undocumented status, a 429 without Retry-After, a wrong content type", async () => {
    await expect(expectDocumented(answer("GET", "/api/webhooks/wh_1", 404, { _tag: "NotFound", message: "gone" })))
      .rejects.toThrow(/does not allow/)
    await expect(expectDocumented(answer("GET", "/api/webhooks/wh_1", 409, { statusCode: 409, message: "no" }))).rejects
      .toThrow(/not documented/)
    await expect(expectDocumented(answer("POST", "/api/messages", 429, { statusCode: 429, message: "slow down" })))
      .rejects.toThrow(/headers/)
    await expect(
      expectDocumented({
        ...answer("GET", "/health", 200, { status: "ok" }),
        headers: new Headers({ "content-type": "text/plain" })
      })
    )
      .rejects.toThrow(/text\/plain/)
    await expect(expectDocumented(answer("GET", "/health", 200, { status: "ok", extra: 1 }))).rejects.toThrow(
      /does not allow/
    )
  })
})

// No sandbox status events: they would be delivered to the example's webhook before it is turned off.
// Templates approved at once: the broadcast's example names one (a broadcast needs it APPROVED).
layer(testHub({ sandboxStatusDelay: Duration.hours(1), sandboxApprovalDelay: Duration.zero }))(
  "the document's request examples",
  (it) => {
    it.effect("each works when sent as it is, with a token of a kind its operation accepts", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const spring = yield* hub.request("POST", "/templates", {
          token: tenant.instanceToken,
          json: {
            name: "spring_sale",
            language: "en_US",
            category: "MARKETING",
            components: [{ type: "BODY", text: "Hi {{1}}, 20% off today.", example: { body_text: [["Ana"]] } }]
          }
        })
        expect(spring.status, spring.text).toBe(200)
        const withExamples = operations.flatMap(({ method, path, operation }) => {
          const content = isRecord(operation.requestBody) && isRecord(operation.requestBody.content)
            ? operation.requestBody.content
            : {}
          const media = content["application/json"]
          return isRecord(media) && "example" in media ? [{ method, path, example: media.example }] : []
        })
        // The webhook's and the broadcast's examples first (their ids fill the paths of the others), then the
        // webhook's update turns it off: nothing is ever delivered to example.com.
        const order = (path: string, method: string) =>
          path === "/api/webhooks" || path === "/api/broadcasts"
            ? 0
            : path === "/api/webhooks/{id}" && method === "PATCH"
            ? 2
            : 1
        withExamples.sort((a, b) => order(a.path, a.method) - order(b.path, b.method))
        let webhookId = ""
        let broadcastId = ""
        for (const { method, path, example } of withExamples) {
          const kinds = policies.find((policy) =>
            policy.method === method && policy.path === path.replace(/\{(\w+)\}/g, ":$1")
          )?.accepts
          const token = kinds === undefined
            ? undefined
            : kinds.includes("instance")
            ? tenant.instanceToken
            : kinds.includes("session")
            ? tenant.sessionToken
            : tenant.orgToken
          const options: RequestOptions = { json: example, ...(token === undefined ? {} : { token }) }
          const sent = yield* hub.request(
            method,
            path.replace("{id}", webhookId).replace("{broadcastId}", broadcastId),
            options
          )
          expect(sent.status, `${method} ${path}: ${sent.text}`).toBeLessThan(300)
          if (path === "/api/webhooks") webhookId = String(sent.body.id)
          if (path === "/api/broadcasts") broadcastId = String(sent.body.id)
        }
        expect(withExamples.map((e) => `${e.method} ${e.path}`)).toEqual(expect.arrayContaining([
          "POST /api/messages",
          "POST /api/auth/api-tokens",
          "POST /api/webhooks",
          "PATCH /api/webhooks/{id}",
          "POST /templates",
          "POST /api/broadcasts",
          "POST /api/broadcasts/{broadcastId}/recipients",
          "POST /upstream/events"
        ]))
        const webhook = yield* hub.request("GET", `/api/webhooks/${webhookId}`, { token: tenant.instanceToken })
        expect(webhook.body).toMatchObject({ url: "https://example.com/hooks/whatsapp", active: false })
      }))
  }
)

import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { declaredOnly, fileBytes, form, JPEG_HEAD, PNG_HEAD } from "./support/Files.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const DRAFT = "1308927590133476"
const PUBLISHED = "1308927590133477"
const flowJson = JSON.stringify({
  version: "7.1",
  screens: [{ id: "WELCOME", title: "Olá", terminal: true, layout: { type: "SingleColumnLayout", children: [] } }]
})

const jsonFile = (text: string) => ({
  bytes: new TextEncoder().encode(text),
  filename: "flow.json",
  type: "application/json"
})

/** A raw upload: multipart bodies, their bytes and parts as sent, are the wire's matter. */
const upload = (token: string, flowId: string, fields: Parameters<typeof form>[0]) =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", `/flows/${flowId}/assets`, { token, body: form(fields) }))

const calls = Effect.map(
  Effect.flatMap(FakeGraph, (fake) => fake.requests),
  (all) => all.map((r) => `${r.method} ${r.path}`)
)

layer(testHubOnFakeGraph())("flows on the Graph API", (it) => {
  it.effect("GET /flows passes the query upstream and the envelope back", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-flows" })
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* client.flows.list({ urlParams: { limit: 10, fields: "id,name,status" } })
      expect(result).toEqual({
        data: [
          { id: DRAFT, name: "signup", status: "DRAFT", categories: ["SIGN_UP"], validation_errors: [] },
          { id: PUBLISHED, name: "survey", status: "PUBLISHED", categories: ["SURVEY"], validation_errors: [] }
        ],
        paging: { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } }
      })
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.wabaId}/flows`)
      expect(sent.query).toEqual({ limit: "10", fields: "id,name,status" })
      expect(sent.headers.authorization).toBe("Bearer EAAG-flows")
    }))

  it.effect("GET /flows/{id}/assets checks the flow is the account's, then lists its assets", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const result = yield* (yield* hub.client(tenant.instanceToken)).flows.assets({ path: { flowId: PUBLISHED } })
      expect(result).toMatchObject({ data: [{ name: "flow.json", asset_type: "FLOW_JSON" }] })
      expect(result.data[0]?.download_url).toMatch(/^http/)
      expect(yield* calls).toEqual([`GET /v23.0/${tenant.wabaId}/flows`, `GET /v23.0/${PUBLISHED}/assets`])
      expect((yield* fake.requests)[0]?.query).toEqual({ fields: "id", limit: "100" })
    }))

  it.effect("the ownership check follows the list's pages", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      yield* fake.respond({ path: `/${tenant.wabaId}/flows` }, {
        body: {
          data: [{ id: "1" }],
          paging: { cursors: { after: "PAGE2" }, next: "https://graph.facebook.com/v23.0/x/flows?after=PAGE2" }
        }
      })
      yield* fake.respond({ path: `/${tenant.wabaId}/flows` }, {
        body: { data: [{ id: "42" }], paging: { cursors: { before: "PAGE1" } } }
      }, 1)
      // Later rules win: the first list call gets page 1, the second page 2.
      yield* fake.reset
      yield* fake.respond({ path: `/${tenant.wabaId}/flows` }, {
        body: { data: [{ id: "42" }], paging: { cursors: { before: "PAGE1" } } }
      })
      yield* fake.respond({ path: `/${tenant.wabaId}/flows` }, {
        body: {
          data: [{ id: "1" }],
          paging: { cursors: { after: "PAGE2" }, next: "https://graph.facebook.com/v23.0/x/flows?after=PAGE2" }
        }
      })
      yield* (yield* hub.client(tenant.instanceToken)).flows.deprecate({ path: { flowId: "42" } })
      const lists = (yield* fake.requests).filter((r) => r.path.endsWith("/flows"))
      expect(lists.map((r) => r.query)).toEqual([{ fields: "id", limit: "100" }, {
        fields: "id",
        limit: "100",
        after: "PAGE2"
      }])
      expect(yield* calls).toContain("POST /v23.0/42/deprecate")
    }))

  it.effect("POST /flows/{id}/assets sends a FLOW_JSON as multipart with its bytes intact", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-asset" })
      yield* fake.respond({ method: "POST", path: `/${DRAFT}/assets` }, {
        body: {
          success: true,
          validation_errors: [{
            error: "INVALID_PROPERTY",
            error_type: "JSON_SCHEMA_ERROR",
            message: "bad",
            line_start: 1
          }]
        }
      })
      const result = yield* upload(tenant.instanceToken, DRAFT, {
        file: jsonFile(flowJson),
        name: "flow.json",
        asset_type: "FLOW_JSON"
      })
      expect(result.status).toBe(200)
      expect(result.body).toEqual({
        success: true,
        validation_errors: [{
          error: "INVALID_PROPERTY",
          error_type: "JSON_SCHEMA_ERROR",
          message: "bad",
          line_start: 1
        }]
      })
      const sent = yield* fake.lastRequest
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe(`/v23.0/${DRAFT}/assets`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-asset")
      expect(sent.form?.name).toBe("flow.json")
      expect(sent.form?.asset_type).toBe("FLOW_JSON")
      expect(sent.form?.file).toEqual({
        filename: "flow.json",
        type: "application/json",
        size: new TextEncoder().encode(flowJson).byteLength,
        text: flowJson
      })
    }))

  it.effect("an IMAGE asset must be PNG or JPEG; success without validation_errors answers []", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "POST", path: `/${DRAFT}/assets` }, { body: { success: true } })
      const png = yield* upload(tenant.instanceToken, DRAFT, {
        file: { bytes: fileBytes(PNG_HEAD, 2048), filename: "logo.png" },
        name: "logo.png",
        asset_type: "IMAGE"
      })
      expect(png.status).toBe(200)
      expect(png.body).toEqual({ success: true, validation_errors: [] })
      const sent = yield* fake.lastRequest
      expect(sent.form?.file).toMatchObject({ filename: "logo.png", type: "image/png", size: 2048 })
      const jpeg = yield* upload(tenant.instanceToken, DRAFT, {
        file: { bytes: fileBytes(JPEG_HEAD, 64), filename: "a" },
        name: "hero.jpg",
        asset_type: "IMAGE"
      })
      expect(jpeg.status).toBe(200)
      expect((yield* fake.lastRequest).form?.file).toMatchObject({ type: "image/jpeg", size: 64 })
    }))

  it.effect("bad assets are refused before any upstream call", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const notJson = yield* upload(tenant.instanceToken, DRAFT, {
        file: jsonFile("{\"version\": "),
        name: "flow.json",
        asset_type: "FLOW_JSON"
      })
      expect(notJson.status).toBe(400)
      expect(notJson.body.details).toEqual([{
        field: "file",
        message: "a FLOW_JSON asset must be a JSON object (the flow definition)"
      }])
      const array = yield* upload(tenant.instanceToken, DRAFT, {
        file: jsonFile("[1,2]"),
        name: "flow.json",
        asset_type: "FLOW_JSON"
      })
      expect(array.status).toBe(400)
      const gif = yield* upload(tenant.instanceToken, DRAFT, {
        file: { bytes: fileBytes([...Buffer.from("GIF89a")], 64), filename: "a.gif" },
        name: "a.gif",
        asset_type: "IMAGE"
      })
      expect(gif.status).toBe(415)
      expect(gif.body).toEqual({
        statusCode: 415,
        message: "An IMAGE asset must be a PNG or JPEG image",
        error: "unsupported_media_type"
      })
      const wrongName = yield* upload(tenant.instanceToken, DRAFT, {
        file: jsonFile(flowJson),
        name: "main.json",
        asset_type: "FLOW_JSON"
      })
      expect(wrongName.status).toBe(400)
      expect(wrongName.body.details).toEqual([{ field: "name", message: "must be flow.json for a FLOW_JSON asset" }])
      const missing = yield* upload(tenant.instanceToken, DRAFT, { asset_type: "VIDEO" })
      expect(missing.status).toBe(400)
      expect(missing.body.details).toEqual([
        { field: "file", message: "is missing" },
        { field: "name", message: "is missing" },
        { field: "asset_type", message: "must be FLOW_JSON or IMAGE" }
      ])
      expect(yield* fake.requests).toEqual([])
    }))

  it.effect("a flow asset over 10 MB is 413: on the file, and at once on a larger declared length", () =>
    Effect.gen(function*() {
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const huge = fileBytes([...Buffer.from("{\"version\":\"")], 10 * 1024 * 1024 + 1)
      const result = yield* upload(tenant.instanceToken, DRAFT, {
        file: { bytes: huge, filename: "flow.json", type: "application/json" },
        name: "flow.json",
        asset_type: "FLOW_JSON"
      })
      expect(result.status).toBe(413)
      expect(result.body).toMatchObject({
        statusCode: 413,
        message: "A flow asset may be at most 10.0 MB; this file is 10.0 MB",
        error: "payload_too_large",
        details: { max_bytes: 10 * 1024 * 1024, size: 10 * 1024 * 1024 + 1 }
      })
      const hub = yield* TestHub
      const declared = yield* declaredOnly(
        hub.baseUrl,
        `/flows/${DRAFT}/assets`,
        tenant.instanceToken,
        11 * 1024 * 1024
      )
      expect(declared).toMatch(/^HTTP\/1\.1 413/)
      expect(declared).toContain("at most 10.0 MB per file")
      expect(yield* fake.requests).toEqual([])
    }))

  it.effect("POST /flows/{id}/deprecate answers {success}; an upstream refusal keeps its meaning", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-deprecate" })
      const client = yield* hub.client(tenant.instanceToken)
      const done = yield* client.flows.deprecate({ path: { flowId: PUBLISHED } })
      expect(done).toEqual({ success: true })
      const sent = yield* fake.lastRequest
      expect(sent).toMatchObject({ method: "POST", path: `/v23.0/${PUBLISHED}/deprecate` })
      expect(sent.headers.authorization).toBe("Bearer EAAG-deprecate")

      yield* fake.respond({ method: "POST", path: `/${DRAFT}/deprecate` }, {
        status: 400,
        body: { error: { message: "Flow is not published", code: 139001, error_subcode: 4016012, fbtrace_id: "F" } }
      })
      const refused = yield* refusedWith(client.flows.deprecate({ path: { flowId: DRAFT } }), "UpstreamFailure")
      expect(refused.status).toBe(400)
      expect({ message: refused.message, error: refused.error, details: refused.details }).toEqual({
        message: "Flow is not published",
        error: "upstream_error",
        details: { upstream: { code: 139001, error_subcode: 4016012, fbtrace_id: "F" } }
      })
    }))

  it.effect("a flow not listed under the account is 404 everywhere, with no call on it; ids must be numeric", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const foreign = "999000999"
      const notFound = { statusCode: 404, message: `flow ${foreign} was not found`, error: "not_found" }
      const client = yield* hub.client(tenant.instanceToken)
      for (
        const call of [
          client.flows.assets({ path: { flowId: foreign } }),
          client.flows.deprecate({ path: { flowId: foreign } })
        ]
      ) {
        const refused = yield* refusedWith(call, "NotFound")
        expect({
          statusCode: refused.statusCode,
          message: refused.message,
          error: refused.error,
          details: refused.details
        }).toEqual({ ...notFound, details: undefined })
      }
      expect(
        (yield* upload(tenant.instanceToken, foreign, {
          file: jsonFile(flowJson),
          name: "flow.json",
          asset_type: "FLOW_JSON"
        })).body
      ).toEqual(notFound)
      expect((yield* calls).every((c) => c === `GET /v23.0/${tenant.wabaId}/flows`)).toBe(true)

      // Not numeric: the typed client would refuse to encode the path, so it goes raw.
      const bad = yield* hub.request("POST", "/flows/abc/deprecate", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([{ field: "flowId", message: "must be a numeric Graph id (digits only)" }])
    }))

  it.effect("flows are instance-only", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* hub.client(tenant.orgToken)
      const path = { flowId: DRAFT }
      for (
        const call of [
          client.flows.list({ urlParams: {} }),
          client.flows.assets({ path }),
          client.flows.deprecate({ path })
        ]
      ) {
        const refused = yield* refusedWith(call, "Forbidden")
        expect(refused.error).toBe("forbidden_token_kind")
      }
      // An upload without a body: the typed client cannot send one, so it goes raw.
      const result = yield* hub.request("POST", `/flows/${DRAFT}/assets`, { token: tenant.orgToken })
      expect(result.status).toBe(403)
      expect(result.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
    }))
})

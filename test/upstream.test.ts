/**
 * GraphUpstream against the recording FakeGraph: exact paths, headers and bodies of the calls,
 * error envelope decoding, timeouts, network failures and the retry rules (reads only).
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted, Stream } from "effect"
import { rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { hubConfigWith } from "../src/Config.js"
import { Metrics } from "../src/Metrics/Metrics.js"
import { GraphUpstream } from "../src/Upstream/Graph.js"
import { Upstream, type UpstreamTarget } from "../src/Upstream/Upstream.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { sendVia } from "./support/UpstreamSend.js"

const target: UpstreamTarget = {
  phoneNumberId: "106540352242922",
  wabaId: "102290129340398",
  accessToken: Redacted.make("EAAG-instance-token")
}
const textBody = {
  messaging_product: "whatsapp",
  to: "+16505551234",
  type: "text",
  text: { body: "Does it come in blue?" }
}

const collectText = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Stream.runFold(stream, "", (text, chunk) => text + new TextDecoder().decode(chunk))

const setup = Effect.gen(function*() {
  const fake = yield* FakeGraph
  yield* fake.reset
  return { fake, upstream: yield* Upstream }
})

layer(testHubOnFakeGraph())("GraphUpstream calls", (it) => {
  it.effect("sendMessage posts the body as JSON to /{phone}/messages with the instance's Bearer token", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const sent = yield* sendVia(upstream, target, textBody)
      expect(sent.contacts).toEqual([{ input: "+16505551234", wa_id: "16505551234" }])
      expect(sent.messages[0]?.id).toMatch(/^wamid\./)
      const request = yield* fake.lastRequest
      expect(request.method).toBe("POST")
      expect(request.path).toBe("/v23.0/106540352242922/messages")
      expect(request.headers.authorization).toBe("Bearer EAAG-instance-token")
      expect(request.headers["content-type"]).toBe("application/json")
      expect(request.headers["user-agent"]).toBe("messaging-hub/0.1")
      expect(request.json).toEqual(textBody)
      expect(yield* fake.requests).toHaveLength(1)
    }))

  it.effect("the send response is returned as the upstream gave it, extra fields included", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const answer = {
        messaging_product: "whatsapp",
        contacts: [{ input: "16505551234", wa_id: "16505551234", user_id: "US.1349" }],
        messages: [{ id: "wamid.HBgLMTY1MDUwNzY1MjAVAgARGBI5QTND", message_status: "accepted" }]
      }
      yield* fake.respond({ method: "POST", path: "/106540352242922/messages" }, { body: answer })
      expect(yield* sendVia(upstream, target, textBody)).toEqual(answer)
    }))

  it.effect("uploadMedia sends multipart with the file part, its type and messaging_product", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const uploaded = yield* upstream.uploadMedia(target, {
        filename: "photo.jpg",
        mimeType: "image/jpeg",
        size: 9,
        content: new Blob(["JPEGBYTES"])
      })
      expect(uploaded.id).toMatch(/^\d+$/)
      const request = yield* fake.lastRequest
      expect(request.path).toBe("/v23.0/106540352242922/media")
      expect(request.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/)
      expect(request.headers.authorization).toBe("Bearer EAAG-instance-token")
      expect(request.form).toEqual({
        messaging_product: "whatsapp",
        type: "image/jpeg",
        file: { filename: "photo.jpg", type: "image/jpeg", size: 9, text: "JPEGBYTES" }
      })
    }))

  it.effect("a file-backed upload (Bun.file) reaches the upstream with its bytes and exact Content-Length", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const path = join(tmpdir(), `hub-upload-${process.pid}-${Date.now()}.json`)
      const json = JSON.stringify({ version: "7.2", screens: [], note: "Olá" })
      writeFileSync(path, json)
      const size = Buffer.byteLength(json)
      yield* upstream.uploadFlowAsset(target, "1308927590133476", {
        name: "flow.json",
        assetType: "FLOW_JSON",
        file: { filename: "flow.json", mimeType: "application/json", size, content: Bun.file(path) }
      }).pipe(Effect.ensuring(Effect.sync(() => rmSync(path, { force: true }))))
      const request = yield* fake.lastRequest
      expect(request.form?.file).toEqual({ filename: "flow.json", type: "application/json", size, text: json })
      expect(Number(request.headers["content-length"])).toBeGreaterThan(size)
      expect(request.headers["transfer-encoding"]).toBeUndefined()
    }))

  it.effect("getMedia asks for the media on the instance's number and downloadMedia fetches its URL with the same token", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const uploaded = yield* upstream.uploadMedia(target, {
        filename: "a.txt",
        mimeType: "text/plain",
        size: 5,
        content: new Blob(["hello"])
      })
      const info = yield* upstream.getMedia(target, uploaded.id)
      const lookup = yield* fake.lastRequest
      expect(lookup.method).toBe("GET")
      expect(lookup.path).toBe(`/v23.0/${uploaded.id}`)
      expect(lookup.query).toEqual({ phone_number_id: "106540352242922" })
      expect(info).toMatchObject({ id: uploaded.id, mime_type: "text/plain", file_size: "5" })

      const download = yield* upstream.downloadMedia(target, info.url)
      expect(download.contentType).toBe("text/plain")
      expect(download.contentLength).toBe(5)
      expect(yield* collectText(download.body)).toBe("hello")
      const fetched = yield* fake.lastRequest
      expect(fetched.path).toBe(`/lookaside/${uploaded.id}`)
      expect(fetched.headers.authorization).toBe("Bearer EAAG-instance-token")
      expect(fetched.headers["user-agent"]).toBe("messaging-hub/0.1")
    }))

  it.effect("template, settings, calls and flow calls use their Graph paths, methods and bodies", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const template = {
        name: "order_update",
        language: "en_US",
        category: "UTILITY",
        components: [{ type: "BODY", text: "Hi {{1}}" }]
      }
      expect(yield* upstream.createTemplate(target, template)).toMatchObject({ status: "PENDING", category: "UTILITY" })
      yield* upstream.getSettings(target, true)
      yield* upstream.updateSettings(target, { storage_configuration: { status: "DEFAULT" } })
      yield* upstream.callAction(target, { messaging_product: "whatsapp", action: "pre_accept", to: "16505551234" })
      yield* upstream.deprecateFlow(target, "1308927590133477")
      yield* upstream.getSettings(target, false)
      const seen = (yield* fake.requests).map((r) => ({ method: r.method, path: r.path, query: r.query, json: r.json }))
      expect(seen).toEqual([
        { method: "POST", path: "/v23.0/102290129340398/message_templates", query: {}, json: template },
        {
          method: "GET",
          path: "/v23.0/106540352242922/settings",
          query: { include_sip_credentials: "true" },
          json: undefined
        },
        {
          method: "POST",
          path: "/v23.0/106540352242922/settings",
          query: {},
          json: { storage_configuration: { status: "DEFAULT" } }
        },
        {
          method: "POST",
          path: "/v23.0/106540352242922/calls",
          query: {},
          json: { messaging_product: "whatsapp", action: "pre_accept", to: "16505551234" }
        },
        { method: "POST", path: "/v23.0/1308927590133477/deprecate", query: {}, json: undefined },
        {
          method: "GET",
          path: "/v23.0/106540352242922/settings",
          query: { include_sip_credentials: "false" },
          json: undefined
        }
      ])
    }))

  it.effect("list calls pass the defined query values only, and path segments are URL-encoded", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* upstream.listActivities(target, {
        limit: "10",
        since: "2025-01-01",
        until: undefined,
        activity_type: "TEMPLATE_CREATED"
      })
      yield* upstream.listQrCodes(target, { fields: "code,prefilled_message", after: undefined })
      yield* upstream.getQrCode(target, "AB/C D", {})
      yield* upstream.getGroup(target, "120363@g.us")
      yield* upstream.listPhoneNumbers(target, {})
      yield* upstream.listFlows(target, {})
      yield* upstream.listFlowAssets(target, "1308927590133476")
      yield* upstream.getComplianceInfo(target)
      yield* upstream.getBusinessProfile(target, { fields: "about,email" })
      yield* upstream.listTemplates(target, { limit: "5" })
      yield* upstream.getTemplate(target, "594425479261596")
      const seen = (yield* fake.requests).map((r) => `${r.method} ${r.path} ${JSON.stringify(r.query)}`)
      expect(seen).toEqual([
        `GET /v23.0/102290129340398/activities {"limit":"10","since":"2025-01-01","activity_type":"TEMPLATE_CREATED"}`,
        `GET /v23.0/106540352242922/message_qrdls {"fields":"code,prefilled_message"}`,
        `GET /v23.0/106540352242922/message_qrdls/AB%2FC%20D {}`,
        `GET /v23.0/120363%40g.us {}`,
        `GET /v23.0/102290129340398/phone_numbers {}`,
        `GET /v23.0/102290129340398/flows {}`,
        `GET /v23.0/1308927590133476/assets {}`,
        `GET /v23.0/106540352242922/business_compliance_info {}`,
        `GET /v23.0/106540352242922/whatsapp_business_profile {"fields":"about,email"}`,
        `GET /v23.0/102290129340398/message_templates {"limit":"5"}`,
        `GET /v23.0/594425479261596 {}`
      ])
      for (const request of yield* fake.requests) {
        expect(request.headers.authorization).toBe("Bearer EAAG-instance-token")
      }
    }))

  it.effect("uploadFlowAsset sends file, name, asset_type and messaging_product as multipart", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const flowJson = JSON.stringify({ version: "7.2", screens: [] })
      const answer = yield* upstream.uploadFlowAsset(target, "1308927590133476", {
        name: "flow.json",
        assetType: "FLOW_JSON",
        file: {
          filename: "flow.json",
          mimeType: "application/json",
          size: flowJson.length,
          content: new Blob([flowJson])
        }
      })
      expect(answer).toEqual({ success: true, validation_errors: [] })
      const request = yield* fake.lastRequest
      expect(request.method).toBe("POST")
      expect(request.path).toBe("/v23.0/1308927590133476/assets")
      expect(request.form).toEqual({
        messaging_product: "whatsapp",
        name: "flow.json",
        asset_type: "FLOW_JSON",
        file: { filename: "flow.json", type: "application/json", size: flowJson.length, text: flowJson }
      })
    }))
})

layer(testHubOnFakeGraph())("GraphUpstream errors and retries", (it) => {
  it.effect("a Graph error envelope is decoded: status, code, subcode, message, fbtrace_id, details and Retry-After", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "POST", path: /\/messages$/ }, {
        status: 400,
        headers: { "retry-after": "17" },
        body: {
          error: {
            message: "(#131030) Recipient phone number not in allowed list",
            type: "OAuthException",
            code: 131030,
            error_subcode: 2655007,
            error_data: {
              messaging_product: "whatsapp",
              details: "Recipient phone number not in allowed list: Add it and try again."
            },
            fbtrace_id: "AbCdEfGhIjKlMnOp"
          }
        }
      })
      const error = yield* Effect.flip(sendVia(upstream, target, textBody))
      expect({ ...error, message: error.message }).toEqual({
        _tag: "UpstreamError",
        kind: "graph",
        status: 400,
        code: 131030,
        subcode: 2655007,
        message: "(#131030) Recipient phone number not in allowed list",
        fbtraceId: "AbCdEfGhIjKlMnOp",
        details: "Recipient phone number not in allowed list: Add it and try again.",
        retryAfterSeconds: 17
      })
    }))

  it.effect("an error answer without a Graph body still yields an UpstreamError with code 0", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "POST", path: /\/messages$/ }, { status: 502, body: "<html>Bad Gateway</html>" })
      const error = yield* Effect.flip(sendVia(upstream, target, textBody))
      expect(error).toMatchObject({ kind: "graph", status: 502, code: 0, subcode: undefined, fbtraceId: undefined })
      expect(error.message).toContain("HTTP 502")
    }))

  it.effect("a 2xx answer missing the fields the hub reads is a 502-class upstream error", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "POST", path: /\/messages$/ }, {
        body: { messaging_product: "whatsapp", messages: [] }
      })
      const error = yield* Effect.flip(sendVia(upstream, target, textBody))
      expect(error).toMatchObject({ kind: "graph", status: 502, code: 0 })
      expect(error.message).toBe("The upstream answered the send with an unexpected body")
    }))

  it.effect("a read is retried on 5xx and succeeds when the upstream recovers", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "GET", path: /\/message_templates$/ }, {
        status: 500,
        body: { error: { message: "boom", code: 1 } }
      }, 2)
      const list = yield* upstream.listTemplates(target, {})
      expect(list).toEqual({ data: [], paging: { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } } })
      expect((yield* fake.requests).map((r) => r.path)).toEqual(
        Array(3).fill("/v23.0/102290129340398/message_templates")
      )
    }))

  it.effect("a read gives up after three tries and reports the last failure", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "GET", path: /\/settings$/ }, {
        status: 503,
        body: { error: { message: "(#2) Service temporarily unavailable", code: 2 } }
      }, 5)
      const error = yield* Effect.flip(upstream.getSettings(target, false))
      expect(error).toMatchObject({ kind: "graph", status: 503, code: 2 })
      expect(yield* fake.requests).toHaveLength(3)
    }))

  it.effect("a read is retried on throttling (code 130429) but not on a 4xx parameter error", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "GET", path: /\/flows$/ }, {
        status: 400,
        body: { error: { message: "(#130429) Rate limit hit", code: 130429 } }
      })
      const flows = yield* upstream.listFlows(target, {})
      expect(flows.data).toHaveLength(2)
      expect(yield* fake.requests).toHaveLength(2)

      yield* fake.reset
      yield* fake.respond({ method: "GET", path: /\/flows$/ }, {
        status: 400,
        body: { error: { message: "(#100) Invalid parameter", code: 100 } }
      })
      const error = yield* Effect.flip(upstream.listFlows(target, {}))
      expect(error).toMatchObject({ status: 400, code: 100 })
      expect(yield* fake.requests).toHaveLength(1)
    }))

  it.effect("sends, uploads and other writes are never retried, even on 5xx", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      const failure = {
        status: 500,
        body: { error: { message: "(#131000) Something went wrong", code: 131000, is_transient: true } }
      }
      yield* fake.respond({ path: /./ }, failure, 10)
      expect(yield* Effect.flip(sendVia(upstream, target, textBody))).toMatchObject({ status: 500, code: 131000 })
      yield* Effect.flip(
        upstream.uploadMedia(target, { filename: "a.jpg", mimeType: "image/jpeg", size: 1, content: new Blob(["x"]) })
      )
      yield* Effect.flip(upstream.createTemplate(target, { name: "x" }))
      yield* Effect.flip(upstream.updateSettings(target, { calling: { status: "ENABLED" } }))
      yield* Effect.flip(upstream.callAction(target, { action: "pre_accept" }))
      yield* Effect.flip(upstream.deprecateFlow(target, "1"))
      expect((yield* fake.requests).map((r) => `${r.method} ${r.path}`)).toEqual([
        "POST /v23.0/106540352242922/messages",
        "POST /v23.0/106540352242922/media",
        "POST /v23.0/102290129340398/message_templates",
        "POST /v23.0/106540352242922/settings",
        "POST /v23.0/106540352242922/calls",
        "POST /v23.0/1/deprecate"
      ])
    }))

  it.effect("an unknown object is the fake's 404 Graph error 100/33", () =>
    Effect.gen(function*() {
      const { upstream } = yield* setup
      const error = yield* Effect.flip(upstream.getTemplate(target, "no-such-object"))
      expect(error).toMatchObject({ kind: "graph", status: 404, code: 100, subcode: 33 })
    }))
})

layer(testHubOnFakeGraph({ graphTimeout: Duration.millis(300) }))("GraphUpstream timeout", (it) => {
  it.effect("an upstream that never answers is a timeout, and a timed-out send is not repeated", () =>
    Effect.gen(function*() {
      const { fake, upstream } = yield* setup
      yield* fake.respond({ method: "POST", path: /\/messages$/ }, { hang: true })
      const error = yield* Effect.flip(sendVia(upstream, target, textBody))
      expect(error).toMatchObject({ kind: "timeout", status: 0, code: 0 })
      expect(error.message).toContain("the send")
      expect(yield* fake.requests).toHaveLength(1)
    }))
})

/** A port nothing listens on: bound once by the OS, then released. */
const closedPort = () => {
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") })
  const port = server.port
  server.stop(true)
  return port
}

const unreachable = GraphUpstream.pipe(
  Layer.provide(Metrics.Off),
  Layer.provide(
    hubConfigWith({
      upstream: "graph",
      graphUrl: `http://127.0.0.1:${closedPort()}/v23.0`,
      graphRetryBase: Duration.millis(1)
    })
  )
)

layer(unreachable)("GraphUpstream network failure", (it) => {
  it.effect("an upstream that cannot be reached is a network error", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const error = yield* Effect.flip(upstream.getComplianceInfo(target))
      expect(error).toMatchObject({ kind: "network", status: 0, code: 0 })
      expect(error.message).not.toBe("")
    }))
})

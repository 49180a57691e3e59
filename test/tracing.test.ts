/**
 * Traces (Tracing/): a hub with OTEL_EXPORTER_OTLP_ENDPOINT set exports its spans over OTLP/HTTP to
 * a collector this test runs (a receiver on 127.0.0.1 that records every POST /v1/traces). One
 * upstream event's trace is checked end to end — the post, its signature, its commit, the delivery
 * attempt to the customer, all in one trace with their ids — and a send's span with its Graph call
 * as a child; none of what was exported holds a secret or a message's body. Both engines.
 */
import { expect, layer } from "@effect/vitest"
import { ConfigProvider, Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import { tracingSettings } from "../src/Tracing/Settings.js"
import { parentOf, traceparentOf } from "../src/Tracing/Spans.js"
import { engines } from "./support/Databases.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"
import { itemsOf, seedTenant, TestHub } from "./support/TestHub.js"
import { envelope, inboundChange, signBody } from "./support/UpstreamPayloads.js"

const APP_SECRET = "tracing-app-secret"
const ACCESS_TOKEN = "tracing-graph-access-token"

/** A span as OTLP/JSON carries it, with its attributes read into plain values. */
interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly attributes: Readonly<Record<string, unknown>>
  readonly status: { readonly code: number }
}

/** An OTLP/JSON attribute value, as far as the hub's attributes go (strings, integers, arrays of them). */
interface AttributeValue {
  readonly stringValue?: string | undefined
  readonly intValue?: number | string | undefined
  readonly boolValue?: boolean | undefined
  readonly doubleValue?: number | undefined
  readonly arrayValue?: { readonly values: ReadonlyArray<AttributeValue> } | undefined
}

const AttributeValue: Schema.Schema<AttributeValue> = Schema.Struct({
  stringValue: Schema.optional(Schema.String),
  intValue: Schema.optional(Schema.Union(Schema.Number, Schema.String)),
  boolValue: Schema.optional(Schema.Boolean),
  doubleValue: Schema.optional(Schema.Number),
  arrayValue: Schema.optional(Schema.Struct({ values: Schema.Array(Schema.suspend(() => AttributeValue)) }))
})

const valueOf = (value: AttributeValue): unknown =>
  value.arrayValue !== undefined
    ? value.arrayValue.values.map(valueOf)
    : value.stringValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.boolValue ??
      value.doubleValue

/** An export as the collector receives it (OTLP/HTTP JSON), the fields the test reads. */
const OtlpExport = Schema.parseJson(Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({
    scopeSpans: Schema.Array(Schema.Struct({
      spans: Schema.Array(Schema.Struct({
        traceId: Schema.String,
        spanId: Schema.String,
        parentSpanId: Schema.optional(Schema.String),
        name: Schema.String,
        attributes: Schema.Array(Schema.Struct({ key: Schema.String, value: AttributeValue })),
        status: Schema.Struct({ code: Schema.Number })
      }))
    }))
  }))
}))
const decodeExport = Schema.decodeUnknownSync(OtlpExport)

/** Every span the collector received, in the order received. */
const spansOf = (requests: ReadonlyArray<ReceivedRequest>): ReadonlyArray<ExportedSpan> =>
  requests.flatMap((request) => {
    const exported = decodeExport(request.body)
    return exported.resourceSpans.flatMap((resource) =>
      resource.scopeSpans.flatMap((scope) =>
        scope.spans.map((span) => ({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId,
          name: span.name,
          status: span.status,
          attributes: Object.fromEntries(span.attributes.map((a) => [a.key, valueOf(a.value)]))
        }))
      )
    )
  })

/** The collector: what the hub exports to (OTEL_EXPORTER_OTLP_ENDPOINT). */
class Collector extends Context.Tag("test/Collector")<Collector, Effect.Effect.Success<typeof collector>>() {}

const collector = makeReceiver()

/** Waits until the spans received satisfy `found` (woken by each export, never by sleeping). */
const waitForSpans = <A>(what: string, found: (spans: ReadonlyArray<ExportedSpan>) => A | undefined) =>
  Effect.gen(function*() {
    const received = yield* Collector
    const requests = yield* received.waitFor(what, (requests) => found(spansOf(requests)) !== undefined)
    const result = found(spansOf(requests))
    return result === undefined ? yield* Effect.dieMessage(what) : result
  })

/** A hub on a fake Graph, exporting to the collector every 20 ms. */
const tracedHub = (engine: (typeof engines)[number]) =>
  Layer.unwrapScoped(Effect.map(collector, (received) =>
    testHubOnFakeGraph({
      engine,
      appSecret: Option.some(Redacted.make(APP_SECRET)),
      webhookAllowPrivate: true,
      // A failed first attempt is retried at once, by a dispatcher round that leases it from the database.
      webhookRetry: [Duration.millis(10)],
      tracing: Option.some({
        tracesUrl: `${received.url}/v1/traces`,
        serviceName: "hub-under-test",
        headers: Redacted.make({}),
        exportInterval: Duration.millis(20)
      })
    }).pipe(Layer.merge(Layer.succeed(Collector, received)))))

/** What must never be exported: the secrets and the bodies the test used. */
const expectNoSecrets = (requests: ReadonlyArray<ReceivedRequest>, secrets: ReadonlyArray<string>) => {
  const exported = requests.map((r) => r.body).join("\n")
  for (const secret of secrets) expect(exported, secret).not.toContain(secret)
}

for (const engine of engines) {
  layer(tracedHub(engine), { excludeTestServices: true, timeout: 30_000 })(`tracing (${engine})`, (it) => {
    it.scoped("one upstream event is one trace: the post, its signature, its commit and each delivery attempt", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant({ accessToken: ACCESS_TOKEN })
        // The first attempt fails: the retry is leased from the database, where the event kept its traceparent.
        const customer = yield* makeReceiver((_, index) => ({ status: index === 0 ? 500 : 200 }))
        const created = yield* hub.request("POST", "/api/webhooks", {
          token: tenant.instanceToken,
          json: { url: `${customer.url}/hook`, name: "traced" }
        })
        expect(created.status).toBe(201)
        const webhookId = String(created.body.id)
        const messageText = `a private message ${Math.random()}`
        const body = JSON.stringify(envelope([tenant.wabaId, [
          inboundChange(tenant, {
            from: "16505551234",
            id: `wamid.TRACE${Date.now()}`,
            timestamp: "1749416383",
            type: "text",
            text: { body: messageText }
          })
        ]]))
        const posted = yield* hub.request("POST", "/upstream/events", {
          body,
          headers: { "content-type": "application/json", "x-hub-signature-256": signBody(APP_SECRET, body) }
        })
        expect(posted.status).toBe(200)
        expect(posted.body).toMatchObject({ accepted: 1, deliveries: 1 })
        const [failed, delivered] = yield* customer.waitFor("both attempts", (requests) => requests.length === 2)

        const trace = yield* waitForSpans("the event's spans", (spans) => {
          const attempts = spans.filter((s) =>
            s.name === "Delivery.attempt" && s.attributes["hub.webhook_id"] === webhookId
          )
          const [first, attempt] = [1, 2].map((n) => attempts.find((s) => s.attributes["hub.attempt"] === n))
          const post = spans.find((s) => s.name === "POST /upstream/events" && s.traceId === attempt?.traceId)
          const commit = spans.find((s) => s.name === "UpstreamEvents.commit" && s.traceId === attempt?.traceId)
          const signature = spans.find((s) => s.name === "UpstreamEvents.signature" && s.traceId === attempt?.traceId)
          return first && attempt && post && commit && signature
            ? { first, attempt, post, commit, signature }
            : undefined
        })
        const { attempt, commit, first, post, signature } = trace
        // One trace: the post is its root, the signature and the commit its children, the attempt the commit's.
        expect(post.parentSpanId ?? "").toBe("")
        expect(post.attributes).toMatchObject({
          "http.request.method": "POST",
          "http.route": "/upstream/events",
          "http.response.status_code": 200
        })
        expect(signature.parentSpanId).toBe(post.spanId)
        expect(commit.parentSpanId).toBe(post.spanId)
        expect(first.traceId).toBe(post.traceId)
        expect(first.parentSpanId).toBe(commit.spanId)
        expect(attempt.parentSpanId).toBe(commit.spanId)
        expect(commit.attributes).toMatchObject({
          "hub.changes": 1,
          "hub.accepted": 1,
          "hub.deliveries": 1,
          "hub.phone_number_ids": [tenant.phoneNumberId],
          "hub.instance_ids": [tenant.instanceId]
        })
        const eventIds = commit.attributes["hub.event_ids"]
        expect(eventIds).toEqual([expect.stringMatching(/^evt_/)])
        expect(attempt.attributes).toMatchObject({
          "hub.event_id": Array.isArray(eventIds) ? eventIds[0] : undefined,
          "hub.webhook_id": webhookId,
          "hub.delivery_id": expect.stringMatching(/.+/),
          "hub.webhook_message_id": delivered?.headers["webhook-id"],
          "hub.attempt": 2,
          "hub.attempt_result": "Succeeded",
          "http.response.status_code": 200,
          "server.address": "127.0.0.1"
        })
        expect(first.attributes).toMatchObject({
          "hub.delivery_id": attempt.attributes["hub.delivery_id"],
          "hub.attempt_result": "RetryAt",
          "http.response.status_code": 500
        })
        expect(first.status.code).toBe(2) // ERROR
        expect(attempt.status.code).toBe(1) // OK
        // The customer is handed the trace (W3C Trace Context): each attempt's own span.
        expect(parentOf(failed?.headers.traceparent)).toMatchObject({ traceId: post.traceId, spanId: first.spanId })
        expect(parentOf(delivered?.headers.traceparent)).toMatchObject({
          traceId: post.traceId,
          spanId: attempt.spanId
        })
        const received = yield* Collector
        expectNoSecrets(received.requests, [
          APP_SECRET,
          ACCESS_TOKEN,
          String(created.body.secret),
          tenant.instanceToken,
          messageText,
          signBody(APP_SECRET, body).slice("sha256=".length)
        ])
      }))

    it.effect("a send is a span under its request, with its Graph call as a child", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant({ accessToken: ACCESS_TOKEN })
        const text = `a private text ${Math.random()}`
        const sent = yield* hub.request("POST", "/api/messages", {
          token: tenant.orgToken,
          json: { phone_number_id: tenant.phoneNumberId, to: "16505551234", type: "text", text: { body: text } }
        })
        expect(sent.status).toBe(200)
        const [answered] = itemsOf(sent.body, "messages")
        const wamid = answered?.id
        expect(wamid).toMatch(/^wamid\./)
        expect((yield* fake.lastRequest).headers.authorization).toBe(`Bearer ${ACCESS_TOKEN}`)

        const { graph, request, send } = yield* waitForSpans("the send's spans", (spans) => {
          const graph = spans.find((s) => s.name === "Graph.sendMessage" && s.attributes["hub.wamid"] === wamid)
          const send = spans.find((s) => s.name === "Messages.send" && s.spanId === graph?.parentSpanId)
          const request = spans.find((s) => s.name === "POST /api/messages" && s.spanId === send?.parentSpanId)
          return graph && send && request ? { graph, request, send } : undefined
        })
        expect(new Set([graph.traceId, send.traceId, request.traceId]).size).toBe(1)
        expect(request.attributes).toMatchObject({ "http.route": "/api/messages", "http.response.status_code": 200 })
        expect(send.attributes).toMatchObject({
          "hub.instance_id": tenant.instanceId,
          "hub.organization_id": tenant.organizationId,
          "hub.phone_number_id": tenant.phoneNumberId,
          "hub.message_type": "text",
          "hub.message_id": expect.stringMatching(/.+/),
          "hub.wamid": wamid
        })
        expect(graph.attributes).toMatchObject({
          "http.request.method": "POST",
          "http.response.status_code": 200,
          "server.address": "127.0.0.1",
          "url.path": `/v23.0/${tenant.phoneNumberId}/messages`,
          "hub.phone_number_id": tenant.phoneNumberId
        })
        expectNoSecrets((yield* Collector).requests, [ACCESS_TOKEN, tenant.orgToken, text])
      }))
  })
}

layer(Layer.empty)("tracing settings", (it) => {
  const read = (env: Record<string, string>) =>
    Effect.withConfigProvider(tracingSettings, ConfigProvider.fromMap(new Map(Object.entries(env)), { pathDelim: "_" }))

  it.effect("off without an endpoint; on, traces go to <endpoint>/v1/traces with the service name and headers", () =>
    Effect.gen(function*() {
      expect(yield* read({})).toEqual(Option.none())
      const on = yield* read({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=abc%3D,Other=2",
        OTEL_BSP_SCHEDULE_DELAY: "250"
      })
      const settings = Option.getOrThrow(on)
      expect(settings.tracesUrl).toBe("http://collector:4318/v1/traces")
      expect(settings.serviceName).toBe("messaging-hub")
      expect(Redacted.value(settings.headers)).toEqual({ "x-api-key": "abc=", other: "2" })
      expect(Duration.toMillis(settings.exportInterval)).toBe(250)
      const refused = yield* Effect.flip(read({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }))
      expect(String(refused)).toContain("OTEL_EXPORTER_OTLP_ENDPOINT to be an http(s) URL")
      const badHeaders = yield* Effect.flip(
        read({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_HEADERS: "novalue" })
      )
      expect(String(badHeaders)).toContain("OTEL_EXPORTER_OTLP_HEADERS")
    }))

  it("a traceparent is written and read back; malformed or all-zero ones name no parent", () => {
    const parent = parentOf("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    expect(parent).toMatchObject({
      traceId: "0af7651916cd43dd8448eb211c80319c",
      spanId: "b7ad6b7169203331",
      sampled: true
    })
    expect(parent && traceparentOf(parent)).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    for (const bad of [undefined, "", "00-xyz", "00-00000000000000000000000000000000-b7ad6b7169203331-01"]) {
      expect(parentOf(bad), String(bad)).toBeUndefined()
    }
  })
})

/**
 * What one span of the plain paths costs with tracing on (docs/PERFORMANCE.md): the hub's own
 * helpers (Tracing/Spans.ts) over the OtlpTracer it installs, exporting to a sink in this process,
 * which counts what arrives. The CPU time of the process (all threads) over the spans made, from
 * the first span to the last export; the attributes are a delivery attempt's.
 *
 *   bun scripts/bench/span-cost.ts [spans, default 200000]
 */
import { OtlpSerialization, OtlpTracer } from "@effect/opentelemetry"
import { FetchHttpClient } from "@effect/platform"
import { Duration, Effect } from "effect"
import { annotate, endSpan, parentOf, startSpan } from "../../src/Tracing/Spans.js"

const count = Number(process.argv[2] ?? "200000")
let received = 0
const sink = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    received += (await request.text()).split("\"spanId\"").length - 1
    return Response.json({})
  }
})

const program = Effect.scoped(
  Effect.gen(function*() {
    const tracer = yield* OtlpTracer.make({
      url: `http://127.0.0.1:${sink.port}/v1/traces`,
      resource: { serviceName: "span-cost" },
      exportInterval: Duration.millis(100)
    })
    const parent = parentOf("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    const before = process.cpuUsage()
    const started = performance.now()
    for (let i = 0; i < count; i++) {
      const span = startSpan(tracer, "Delivery.attempt", parent, "client", {
        "hub.delivery_id": `dlv_${i}`,
        "hub.webhook_id": "whk_0123456789",
        "hub.event_id": `evt_${i}`,
        "hub.organization_id": "org_0123456789",
        "hub.webhook_message_id": `msg_${i}`,
        "hub.attempt": 1,
        "http.request.method": "POST",
        "server.address": "receiver.example"
      })
      annotate(span, { "http.response.status_code": 200, "hub.attempt_result": "Succeeded" })
      endSpan(span)
      // Yield now and then, as a serving hub does, so the exporter's fiber runs between batches.
      if (i % 1000 === 999) yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
    return { before, started }
  }).pipe(Effect.provide([FetchHttpClient.layer, OtlpSerialization.layerJson]))
)

const { before, started } = await Effect.runPromise(program) // closing the scope flushes the rest
const cpu = process.cpuUsage(before)
const cpuUs = cpu.user + cpu.system
console.log(JSON.stringify({
  spans: count,
  exported: received,
  cpuUsPerSpan: Number((cpuUs / count).toFixed(2)),
  wallMs: Math.round(performance.now() - started)
}))
void sink.stop(true)

/**
 * A stand-in OpenTelemetry collector for measuring the hub with tracing on (docs/PERFORMANCE.md):
 * accepts OTLP/HTTP JSON at POST /v1/traces on 127.0.0.1, counts the spans, and prints the count
 * when stopped (SIGINT or SIGTERM).
 *
 *   bun scripts/bench/otlp-sink.ts 4318 &
 *   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 bun scripts/bench.ts --quick --scenarios send,events
 */
const port = Number(process.argv[2] ?? "4318")
let spans = 0
let posts = 0

const server = Bun.serve({
  hostname: "127.0.0.1",
  port,
  async fetch(request) {
    if (request.method !== "POST" || new URL(request.url).pathname !== "/v1/traces") {
      return new Response("not found", { status: 404 })
    }
    const text = await request.text()
    posts++
    // Each span carries exactly one "spanId" key in OTLP/JSON; counting them spares parsing megabytes.
    spans += text.split("\"spanId\"").length - 1
    return Response.json({})
  }
})

const stopSink = () => {
  console.log(JSON.stringify({ posts, spans }))
  void server.stop(true)
  process.exit(0)
}
process.on("SIGINT", stopSink)
process.on("SIGTERM", stopSink)
console.error(`otlp-sink: listening on http://127.0.0.1:${server.port}/v1/traces`)

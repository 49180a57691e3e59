/**
 * Fast webhook receivers for the events benchmark. Every POST answers 200 at once and is counted;
 * the ingress time is read from the status id the poster built (`wamid.bench.<epoch ms>.<n>`), so the
 * latency is ingress-to-receipt. GET /stats reports, POST /reset clears. Prints its port.
 */
const latencies: Array<number> = []
const webhookIds = new Set<string>()
let deliveries = 0
const STAMP = /wamid\.bench\.(\d+)\./g

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    const url = new URL(request.url)
    if (request.method === "GET" && url.pathname === "/stats") {
      const sorted = [...latencies].sort((a, b) => a - b)
      const at = (p: number) =>
        sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
      return Response.json({
        deliveries,
        distinctWebhookIds: webhookIds.size,
        events: sorted.length,
        p50Ms: at(50),
        p99Ms: at(99)
      })
    }
    if (request.method === "POST" && url.pathname === "/reset") {
      latencies.length = 0
      webhookIds.clear()
      deliveries = 0
      return Response.json({ ok: true })
    }
    const text = await request.text()
    const now = Date.now()
    deliveries++
    webhookIds.add(request.headers.get("webhook-id") ?? "")
    for (const match of text.matchAll(STAMP)) latencies.push(now - Number(match[1]))
    return new Response(null, { status: 200 })
  }
})
console.log(JSON.stringify({ port: server.port }))

export {}

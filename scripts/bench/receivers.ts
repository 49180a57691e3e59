/**
 * Fast webhook receivers for the events benchmark. Every POST answers 200 at once and is counted;
 * the ingress time is read from the status id the poster built (`wamid.bench.<epoch ms>.<n>`), so the
 * latency is ingress-to-receipt. GET /stats reports, POST /reset clears.
 *
 * For per-person order (the `ordered` scenario), POST /reset may take `{"check": true, "failEvery": k}`:
 * then every k-th delivery is answered 503 once with Retry-After: 2 (its retry is taken), and each webhook path's
 * deliveries about one person (`recipient_user_id`) are checked to arrive one at a time and in the
 * order posted: a delivery of a person arriving while another of theirs is open, while a refused one
 * of theirs is not yet taken, or after a later one was taken, counts as a violation.
 * With `{"slowMs": n}` as its argument, a path under /hook/slow/ answers after n ms (bench.ts
 * `--slow-receiver-ms`).
 * Prints its port.
 */
const slowMs = Number(JSON.parse(process.argv[2] ?? "{}").slowMs ?? 0)
const latencies: Array<number> = []
const webhookIds = new Set<string>()
let deliveries = 0
const STAMP = /wamid\.bench\.(\d+)\.(\d+)/g
const PERSON = /"recipient_user_id":"([^"]+)"/

/** The order check's state, per webhook path and person. */
interface Lane {
  open: number
  /** The post number of the last delivery taken. */
  lastTaken: number
  /** A refused delivery's post number, until it is taken. */
  refused: number | undefined
}
let check = false
let failEvery = 0
let refusedCount = 0
let violations = 0
const lanes = new Map<string, Lane>()
/** Deliveries already refused once (by webhook-id): their retry is taken. */
const refusedOnce = new Set<string>()

/** Checks one delivery against its person's lane; answers whether to refuse it. */
const arrive = (key: string, n: number, webhookId: string) => {
  const lane = lanes.get(key) ?? { open: 0, lastTaken: -1, refused: undefined }
  lanes.set(key, lane)
  if (lane.open > 0 || (lane.refused !== undefined && lane.refused !== n) || n < lane.lastTaken) violations++
  lane.open++
  const refuse = failEvery > 0 && deliveries % failEvery === 0 && !refusedOnce.has(webhookId)
  if (refuse) {
    refusedOnce.add(webhookId)
    refusedCount++
  }
  return { lane, refuse }
}

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
        p99Ms: at(99),
        refused: refusedCount,
        orderViolations: violations,
        lanes: lanes.size
      })
    }
    if (request.method === "POST" && url.pathname === "/reset") {
      const options = JSON.parse((await request.text()) || "{}")
      latencies.length = 0
      webhookIds.clear()
      deliveries = 0
      check = options.check === true
      failEvery = Number(options.failEvery ?? 0)
      refusedCount = 0
      violations = 0
      lanes.clear()
      refusedOnce.clear()
      return Response.json({ ok: true })
    }
    const text = await request.text()
    const now = Date.now()
    deliveries++
    const webhookId = request.headers.get("webhook-id") ?? ""
    const stamps = [...text.matchAll(STAMP)]
    const person = check ? PERSON.exec(text)?.[1] : undefined
    const n = Number(stamps[0]?.[2] ?? -1)
    const checked = person === undefined ? undefined : arrive(`${url.pathname} ${person}`, n, webhookId)
    if (checked?.refuse === true) {
      checked.lane.refused = n
      checked.lane.open--
      // Retried two seconds later: past the person's next post, which must wait for it.
      return new Response(null, { status: 503, headers: { "retry-after": "2" } })
    }
    webhookIds.add(webhookId)
    for (const match of stamps) latencies.push(now - Number(match[1]))
    if (checked !== undefined) {
      checked.lane.open--
      checked.lane.lastTaken = Math.max(checked.lane.lastTaken, n)
      checked.lane.refused = undefined
    }
    if (slowMs > 0 && url.pathname.startsWith("/hook/slow/")) await Bun.sleep(slowMs)
    return new Response(null, { status: 200 })
  }
})
console.log(JSON.stringify({ port: server.port }))

export {}

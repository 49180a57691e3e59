/**
 * Queues a fixed number of sends as fast as the hub answers them: a closed loop over kept-alive
 * connections, each POST /api/messages with `Prefer: respond-async` and the given queue options, run in
 * its own process so it does not share the hub's event loop.
 * Usage: bun scripts/bench/enqueue.ts '<json config>'  →  prints one JSON line of results.
 * Config: { url, token, phoneNumberIds, total, connections, priority?, sendAt?, segments?, textFrom? } (sendAt once passed is left out)
 * Send i goes from number i mod N to its own person (no pair rate binds), with the text "bulk i". The
 * figures: the rate of 202s over the whole run and per segment (the run cut into `segments` equal
 * parts, to show whether the rate falls as the queue deepens), and the latency percentiles.
 */
interface EnqueueConfig {
  readonly url: string
  readonly token: string
  readonly phoneNumberIds: ReadonlyArray<string>
  readonly total: number
  readonly connections: number
  readonly priority?: string
  readonly sendAt?: string
  readonly segments?: number
  /** The first send's text number ("bulk <textFrom>"), so that runs on one database never repeat a text. */
  readonly textFrom?: number
}

const config: EnqueueConfig = JSON.parse(process.argv[2] ?? "{}")
const segments = config.segments ?? 10
const latencies = new Float64Array(config.total)
/** When each segment's last answer came (ms since the start). */
const segmentEnds = new Array<number>(segments).fill(0)
const statuses = new Map<number, number>()
const refusals: Array<string> = []
let errors = 0
let next = 0
let answered = 0

const started = performance.now()
const worker = async () => {
  while (next < config.total) {
    const i = next++
    const body = JSON.stringify({
      phone_number_id: config.phoneNumberIds[i % config.phoneNumberIds.length],
      to: String(15_550_000_000 + i),
      type: "text",
      text: { body: `bulk ${(config.textFrom ?? 0) + i}` },
      ...(config.priority === undefined ? {} : { priority: config.priority }),
      // A send_at the run has passed is left out (due now): the hub refuses one over 5 minutes old.
      ...(config.sendAt === undefined || Date.parse(config.sendAt) <= Date.now() ? {} : { send_at: config.sendAt })
    })
    const sent = performance.now()
    try {
      const response = await fetch(config.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${config.token}`,
          prefer: "respond-async"
        },
        body
      })
      const text = await response.text()
      latencies[i] = performance.now() - sent
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
      if (response.status !== 202 && refusals.length < 5) refusals.push(`${response.status} ${text.slice(0, 300)}`)
    } catch (error) {
      errors++
      if (refusals.length < 5) refusals.push(String(error))
    }
    answered++
    const segment = Math.min(segments - 1, Math.floor(((answered - 1) * segments) / config.total))
    segmentEnds[segment] = performance.now() - started
  }
}
await Promise.all(Array.from({ length: config.connections }, worker))
const elapsed = (performance.now() - started) / 1000
const sorted = latencies.sort()
const percentile = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
const perSegment = config.total / segments
console.log(JSON.stringify({
  requests: config.total,
  accepted: statuses.get(202) ?? 0,
  errors,
  statuses: Object.fromEntries(statuses),
  refusals,
  seconds: elapsed,
  rps: config.total / elapsed,
  segmentRps: segmentEnds.map((end, i) =>
    perSegment / Math.max(1e-3, (end - (i === 0 ? 0 : segmentEnds[i - 1]!)) / 1000)
  ),
  p50Ms: percentile(50),
  p99Ms: percentile(99)
}))

export {}

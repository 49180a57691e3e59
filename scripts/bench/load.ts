/**
 * A closed-loop HTTP load generator, run in its own process so it does not share the hub's event loop.
 * Usage: bun scripts/bench/load.ts '<json config>'  →  prints one JSON line of results.
 * Config: { url, urls?, method, headers?, body?, bearerTokens?, connections, seconds }
 * With bearerTokens, each request takes the next token in turn (to spread load over instances); with
 * urls (one per hub replica, the same path), each connection sends to one of them in turn.
 */
interface LoadConfig {
  readonly url: string
  readonly urls?: ReadonlyArray<string>
  readonly method: string
  readonly headers?: Record<string, string>
  readonly body?: string
  readonly bearerTokens?: ReadonlyArray<string>
  readonly connections: number
  readonly seconds: number
}

const config: LoadConfig = JSON.parse(process.argv[2] ?? "{}")
const latencies: Array<number> = []
const statuses = new Map<number, number>()
let errors = 0
let turn = 0
const deadline = performance.now() + config.seconds * 1000

const worker = async (_: unknown, index: number) => {
  // Each connection stays with one replica, as a load balancer's kept-alive connection would.
  const url = config.urls?.[index % config.urls.length] ?? config.url
  while (performance.now() < deadline) {
    const headers: Record<string, string> = { ...config.headers }
    const tokens = config.bearerTokens
    if (tokens !== undefined && tokens.length > 0) headers.authorization = `Bearer ${tokens[turn++ % tokens.length]}`
    const started = performance.now()
    try {
      const response = await fetch(url, {
        method: config.method,
        headers,
        ...(config.body === undefined ? {} : { body: config.body })
      })
      await response.arrayBuffer()
      latencies.push(performance.now() - started)
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1)
    } catch {
      errors++
    }
  }
}

const started = performance.now()
await Promise.all(Array.from({ length: config.connections }, worker))
const elapsed = (performance.now() - started) / 1000
latencies.sort((a, b) => a - b)
const percentile = (p: number) =>
  latencies.length === 0 ? 0 : latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? 0
const ok = [...statuses].filter(([status]) => status >= 200 && status < 300).reduce((n, [, count]) => n + count, 0)
console.log(JSON.stringify({
  requests: latencies.length,
  ok,
  errors,
  statuses: Object.fromEntries(statuses),
  seconds: elapsed,
  rps: latencies.length / elapsed,
  p50Ms: percentile(50),
  p99Ms: percentile(99)
}))

export {}

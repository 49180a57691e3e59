/**
 * Smoke test of the compiled binary: start `dist/hub serve` on a free port with a fresh database,
 * wait for GET /health, check that the dashboard and the metrics are served from the binary, run
 * one CLI command against the same database, and stop the server.
 * Usage: bun scripts/smoke.ts [path-to-binary]
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const binary = process.argv[2] ?? "dist/hub"
const folder = mkdtempSync(join(tmpdir(), "hub-smoke-"))
const env = { ...process.env, HUB_DB: join(folder, "hub.sqlite"), HUB_LOG_LEVEL: "warning" }

const freePort = (): number => {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}

const fail = (message: string): never => {
  console.error(`smoke: FAILED: ${message}`)
  process.exit(1)
}

const port = freePort()
const server = Bun.spawn([binary, "serve"], { env: { ...env, PORT: String(port) }, stdout: "pipe", stderr: "inherit" })
try {
  const deadline = Date.now() + 15_000
  let health: unknown = undefined
  while (Date.now() < deadline && health === undefined) {
    health = await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json(), () => undefined)
    if (health === undefined) await Bun.sleep(100)
  }
  if (JSON.stringify(health) !== JSON.stringify({ status: "ok" })) {
    fail(`GET /health answered ${JSON.stringify(health)}`)
  }
  console.log(`smoke: GET /health -> ${JSON.stringify(health)}`)

  // The dashboard's assets and the metrics are inside the binary, not read from the source tree.
  const dashboard = await fetch(`http://127.0.0.1:${port}/dashboard`)
  const page = await dashboard.text()
  if (dashboard.status !== 200 || !page.includes("<script")) fail(`GET /dashboard answered ${dashboard.status}`)
  const script = /src="(\/dashboard\/[^"]+\.js)"/.exec(page)?.[1]
  if (script === undefined || (await fetch(`http://127.0.0.1:${port}${script}`)).status !== 200) {
    fail(`the dashboard's script ${script} is not served`)
  }
  console.log(`smoke: GET /dashboard -> 200, ${script} -> 200`)
  const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text())
  if (!metrics.includes("hub_http_request_duration_seconds")) fail("GET /metrics has no request metrics")
  console.log("smoke: GET /metrics -> Prometheus text")

  const cli = Bun.spawnSync([binary, "org", "create", "--name", "Smoke"], { env })
  const created: unknown = JSON.parse(cli.stdout.toString() || "null")
  if (cli.exitCode !== 0 || typeof created !== "object" || created === null || !("id" in created)) {
    fail(`hub org create exited ${cli.exitCode}: ${cli.stdout} ${cli.stderr}`)
  }
  console.log(`smoke: hub org create -> ${JSON.stringify(created)}`)
  console.log("smoke: ok")
} finally {
  server.kill()
  await server.exited
  rmSync(folder, { recursive: true, force: true })
}

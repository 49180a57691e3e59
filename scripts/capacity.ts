/**
 * The capacity model of issue 34, point 2: how far N hub replicas and a PostgreSQL of P cores should
 * go, worked out from what one delivery and one send cost, as two benchmark runs measured them.
 *
 *   bun scripts/bench.ts --db postgres --replicas 1 --scenarios send,events --out one.json
 *   bun scripts/bench.ts --db postgres --replicas 2 --scenarios send,events --out two.json
 *   bun scripts/capacity.ts one.json two.json [--hub-cores 1] [--disk-dir /tmp]
 *                                             [--fsyncs-per-second N --disk-mb-per-second M]
 *
 * Per delivery (the events' overload, the rate the model is about) and per send: the hub's CPU (all
 * replicas), PostgreSQL's CPU (every postgres process), WAL bytes, WAL fsyncs and commits. Then, for
 * N replicas of C cores each and a PostgreSQL of P cores, the highest rate each resource allows, their
 * minimum and which resource it is: the hub's cores (N·C / hub CPU), PostgreSQL's (P / its CPU), the
 * WAL disk's fsyncs (fsyncs a second / fsyncs per delivery) and its bandwidth (bytes a second / WAL
 * bytes per delivery). N = 1 takes the one-replica figures, N ≥ 2 the two-replica run's. The disk's
 * figures are measured here, unless both are given: 8 kB writes over a written 16 MB file, each
 * followed by fdatasync (PostgreSQL's wal_sync_method on Linux), for 2 s; then 64 MB written in 1 MB
 * blocks and one fdatasync; in --disk-dir (default: the temporary folder, where the benchmark's
 * PostgreSQL keeps its data).
 * Last, the check: what each run's machine (hub, PostgreSQL, load and receivers on its cores) should
 * have done by its CPU, against what it did.
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, readFileSync, rmSync, writeSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

const args = process.argv.slice(2)
const option = (name: string, fallback: string) => {
  const at = args.indexOf(name)
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1]! : fallback
}
const files = args.filter((a, i) => a.endsWith(".json") && !args[i - 1]?.startsWith("--"))
if (files.length !== 2) {
  throw new Error("usage: bun scripts/capacity.ts <run with --replicas 1>.json <run with --replicas 2>.json [options]")
}
const hubCores = Number(option("--hub-cores", "1"))

/** A number at `path` in parsed JSON, NaN where there is none. */
const at = (value: unknown, ...path: ReadonlyArray<string>): number => {
  let here = value
  for (const key of path) {
    if (typeof here !== "object" || here === null || !(key in here)) return Number.NaN
    here = Object.entries(here).find(([k]) => k === key)?.[1]
  }
  return typeof here === "number" ? here : Number.NaN
}

interface Cost {
  readonly source: string
  readonly rate: number
  readonly hubUs: number
  readonly pgUs: number
  readonly walBytes: number
  readonly fsyncs: number
  readonly commits: number
  readonly fullPageImages: number
  readonly machineBusyCores: number
}

/** One phase's cost per unit: `kind` is the events' overload (per delivery) or the send path (per send). */
const costOf = (file: string, replicas: number, kind: "delivery" | "send"): Cost => {
  const run: unknown = JSON.parse(readFileSync(file, "utf8"))
  const key = kind === "delivery" ? `eventsMax postgres ×${replicas}` : `send postgres ×${replicas}`
  const figures = at(run, "results", key, "machineBusyCores") >= 0 ? key : ""
  if (figures === "") throw new Error(`${file} has no "${key}" with WAL figures: run the benchmark of this branch`)
  const get = (...path: ReadonlyArray<string>) => at(run, "results", key, ...path)
  return {
    source: `${file}: ${key}`,
    rate: kind === "delivery" ? get("deliveriesPerSecond") : get("viaHub", "rps"),
    hubUs: kind === "delivery" ? get("hubCpuUsPerDelivery") : get("hubCpuUsPerRequest"),
    pgUs: kind === "delivery" ? get("dbCpuUsPerDelivery") : get("dbCpuUsPerRequest"),
    walBytes: get("wal", "bytesPerUnit"),
    fsyncs: get("wal", "fsyncsPerUnit"),
    commits: get("wal", "commitsPerUnit"),
    fullPageImages: get("wal", "fullPageImagesPerUnit"),
    machineBusyCores: get("machineBusyCores")
  }
}

/** The disk's fdatasync rate of 8 kB appends (for 2 s) and its bandwidth writing 64 MB, in `dir`. */
const measureDisk = (dir: string) => {
  const folder = mkdtempSync(join(dir, "capacity-disk-"))
  try {
    // As PostgreSQL's WAL segments (and pg_test_fsync's file): written in full first, so a flush has
    // no file size to record, only the page.
    const fd = openSync(join(folder, "wal"), "w")
    const segment = 16 << 20
    writeSync(fd, Buffer.alloc(segment))
    fdatasyncSync(fd)
    const page = Buffer.alloc(8192, 1)
    let syncs = 0
    const started = performance.now()
    while (performance.now() - started < 2000) {
      writeSync(fd, page, 0, page.length, (syncs * page.length) % segment)
      fdatasyncSync(fd)
      syncs++
    }
    const fsyncsPerSecond = syncs / ((performance.now() - started) / 1000)
    closeSync(fd)
    const big = openSync(join(folder, "bulk"), "w")
    const block = Buffer.alloc(1 << 20, 2)
    const writing = performance.now()
    for (let i = 0; i < 64; i++) writeSync(big, block)
    fdatasyncSync(big)
    const mbPerSecond = 64 / ((performance.now() - writing) / 1000)
    closeSync(big)
    return {
      fsyncsPerSecond,
      mbPerSecond,
      how: `measured in ${dir}: 8 kB overwrites each + fdatasync for 2 s; 64 MB + fdatasync`
    }
  } finally {
    rmSync(folder, { recursive: true, force: true })
  }
}

const givenFsyncs = Number(option("--fsyncs-per-second", "NaN"))
const givenMb = Number(option("--disk-mb-per-second", "NaN"))
const disk = Number.isFinite(givenFsyncs) && Number.isFinite(givenMb)
  ? { fsyncsPerSecond: givenFsyncs, mbPerSecond: givenMb, how: "as given (--fsyncs-per-second, --disk-mb-per-second)" }
  : measureDisk(option("--disk-dir", tmpdir()))

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "–"
const table = (header: ReadonlyArray<string>, body: ReadonlyArray<ReadonlyArray<string>>) =>
  [`| ${header.join(" | ")} |`, `|${header.map(() => "---").join("|")}|`, ...body.map((r) => `| ${r.join(" | ")} |`)]
    .join("\n")

const [oneFile, twoFile] = [files[0]!, files[1]!]
const costs = {
  delivery: { one: costOf(oneFile, 1, "delivery"), two: costOf(twoFile, 2, "delivery") },
  send: { one: costOf(oneFile, 1, "send"), two: costOf(twoFile, 2, "send") }
}
/** The one-replica phase of the two-replica run, the same work measured again: how far a figure moves between runs. */
const again = { delivery: costOf(twoFile, 1, "delivery"), send: costOf(twoFile, 1, "send") }

/** The highest rate each resource allows, and the least of them. */
const limits = (cost: Cost, replicas: number, pgCores: number) => {
  const each: ReadonlyArray<readonly [string, number]> = [
    ["hub CPU", (replicas * hubCores * 1e6) / cost.hubUs],
    ["PostgreSQL CPU", (pgCores * 1e6) / cost.pgUs],
    ["WAL fsyncs", disk.fsyncsPerSecond / cost.fsyncs],
    ["WAL bandwidth", (disk.mbPerSecond * 2 ** 20) / cost.walBytes]
  ]
  const first = each.reduce((least, l) => (l[1] < least[1] ? l : least))
  return { each, first }
}

const perOperation = () => {
  const rows = (["delivery", "send"] as const).flatMap((kind) =>
    ([["×1", costs[kind].one], ["×1 again", again[kind]], ["×2", costs[kind].two]] as const).map(([label, c]) => [
      `per ${kind}, ${label}`,
      fmt(c.rate),
      fmt(c.hubUs),
      fmt(c.pgUs),
      fmt(c.hubUs + c.pgUs),
      fmt(c.walBytes),
      fmt(c.fullPageImages, 3),
      fmt(c.fsyncs, 4),
      fmt(c.commits, 4)
    ])
  )
  return table(
    [
      "phase",
      "rate /s",
      "hub CPU µs",
      "PostgreSQL CPU µs",
      "both µs",
      "WAL bytes",
      "full-page images",
      "WAL fsyncs",
      "commits"
    ],
    rows
  )
}

const grid = (kind: "delivery" | "send") => {
  const pgCores = [2, 4, 8, 16]
  const body = [1, 2, 4, 8].map((n) => [
    `N = ${n}`,
    ...pgCores.map((p) => {
      const { first } = limits(n === 1 ? costs[kind].one : costs[kind].two, n, p)
      return `${fmt(first[1])} (${first[0]})`
    })
  ])
  return table([`${kind === "delivery" ? "deliveries" : "sends"}/s`, ...pgCores.map((p) => `P = ${p}`)], body)
}

/** Where each resource alone would stop, with the per-unit figures of one and of two replicas. */
const saturation = (kind: "delivery" | "send") => {
  const body = (["one", "two"] as const).map((which) => {
    const cost = costs[kind][which]
    return [
      which === "one" ? "×1 figures" : "×2 figures",
      `${fmt((hubCores * 1e6) / cost.hubUs)} per replica`,
      `${fmt(1e6 / cost.pgUs)} per core`,
      fmt(disk.fsyncsPerSecond / cost.fsyncs),
      fmt((disk.mbPerSecond * 2 ** 20) / cost.walBytes)
    ]
  })
  return table([kind, "hub CPU", "PostgreSQL CPU", "WAL fsyncs", "WAL bandwidth"], body)
}

/** This machine: hub, PostgreSQL, load generators and receivers on its cores; what CPU alone allowed, and what was done. */
const check = () => {
  const cores = at(JSON.parse(readFileSync(oneFile, "utf8")), "machine", "cpus")
  const body = (["delivery", "send"] as const).flatMap((kind) =>
    ([["×1", 1, costs[kind].one], ["×1 again", 1, again[kind]], ["×2", 2, costs[kind].two]] as const).map(
      ([label, replicas, c]) => {
        const total = c.hubUs + c.pgUs
        // Hub and PostgreSQL with the machine to themselves: all its cores for both, at most one a replica.
        const predicted = Math.min(
          (cores * 1e6) / total,
          (replicas * 1e6) / c.hubUs,
          limits(c, replicas, cores).first[1]
        )
        const used = (c.rate * total) / 1e6
        // What the rest of the machine (load, receivers, other work) left them, at the same cost per unit.
        const left = Math.max(0, cores - (c.machineBusyCores - used))
        return [
          `${kind}, ${label}`,
          fmt(predicted),
          fmt(c.rate),
          `${fmt((c.rate / predicted) * 100)} %`,
          fmt(used, 2),
          fmt(c.machineBusyCores, 2),
          fmt((left * 1e6) / total)
        ]
      }
    )
  )
  return table(
    [
      "phase",
      `predicted /s (${cores} cores, hub + PostgreSQL only)`,
      "measured /s",
      "measured / predicted",
      "cores used by hub + PostgreSQL",
      "machine busy cores",
      "predicted /s on the cores the rest left"
    ],
    body
  )
}

console.log(`Inputs: ${oneFile} (--replicas 1), ${twoFile} (--replicas 2); ${hubCores} core(s) per replica`)
console.log(`Disk: ${fmt(disk.fsyncsPerSecond)} fsyncs/s, ${fmt(disk.mbPerSecond)} MB/s (${disk.how})\n`)
console.log(`Per operation (overload for deliveries):\n\n${perOperation()}\n`)
console.log(`Where each resource alone saturates:\n\n${saturation("delivery")}\n\n${saturation("send")}\n`)
console.log(`Highest deliveries/s for N replicas and P PostgreSQL cores (first to saturate):\n\n${grid("delivery")}\n`)
console.log(`Highest sends/s:\n\n${grid("send")}\n`)
console.log(`Check against the runs on this machine:\n\n${check()}`)
// Not a resource the model derives: one replica writes one group commit at a time, so its rate can stop
// short of any CPU; the one-replica overloads show where, and with how much of the machine left idle.
const ceiling = (c: Cost) => `${fmt(c.rate)}/s with ${fmt(c.machineBusyCores, 2)} of the machine's cores busy`
console.log(
  `\nOne replica in overload on PostgreSQL: ${ceiling(costs.delivery.one)}; again ${
    ceiling(again.delivery)
  } (a replica's write path, if the machine had cores left)`
)

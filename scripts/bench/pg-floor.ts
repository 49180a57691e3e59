/**
 * What PostgreSQL itself spends per delivery on the hub's own statements, without the hub: the
 * floor no change to the hub's code can go below while the schema stays. One connection per role
 * (ingress, lease, outcome) runs the statement shapes the hub runs in overload (src/Delivery/
 * Outbox.ts, Lease.ts, AttemptLog.ts), in groups of the hub's size, each its own transaction with
 * the commit flushed (the due-rows read is the plain read of free rows, without the shares' list and
 * join, and every attempt succeeds); PostgreSQL's CPU (every process of the server) is divided by the deliveries
 * done. `--variant` changes the schema to price its parts (see VARIANTS). Figures and what they
 * led to: docs/PERFORMANCE.md, "Foreign keys checked per statement".
 *
 *   node_modules/.bin/bun scripts/bench/pg-floor.ts [--hub <binary>] [--seconds 10] [--variant as-is]
 */
import { randomBytes } from "node:crypto"
import { readdirSync, readFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { DELIVERY_PATH_REFERENCES } from "../../src/Sql/migrations/0034_parent_checks.js"
import { constraintOf, type ParentReference } from "../../src/Sql/ParentChecks.js"
import { startPostgres } from "../../test/support/PostgresServer.js"

const { values } = parseArgs({
  options: {
    hub: { type: "string" },
    seconds: { type: "string", default: "10" },
    variant: { type: "string", default: "as-is" },
    webhooks: { type: "string", default: "12" }
  }
})
const seconds = Number(values.seconds)
const webhookCount = Number(values.webhooks)

/** The per-statement checks of a reference (migration 0034), dropped. */
const dropChecks = (ref: ParentReference) => {
  const name = constraintOf(ref)
  return [
    `DROP TRIGGER ${name}_insert ON ${ref.child}`,
    `DROP TRIGGER ${name}_delete ON ${ref.parent}`,
    `DROP TRIGGER ${name}_child_fixed ON ${ref.child}`,
    `DROP TRIGGER ${name}_parent_fixed ON ${ref.parent}`
  ]
}

/** Schema changes priced one at a time, each applied after the hub's migrations. */
const VARIANTS: Record<string, ReadonlyArray<string>> = {
  "as-is": [],
  // As before migration 0034: PostgreSQL's own foreign keys, checked per row.
  "built-in-foreign-keys": DELIVERY_PATH_REFERENCES.flatMap((ref) => [
    ...dropChecks(ref),
    `ALTER TABLE ${ref.child} ADD CONSTRAINT ${
      constraintOf(ref)
    } FOREIGN KEY (${ref.column}) REFERENCES ${ref.parent} (id)`
  ]),
  "no-foreign-keys": DELIVERY_PATH_REFERENCES.flatMap(dropChecks),
  "no-webhook-index": ["DROP INDEX deliveries_webhook"],
  "no-attempt-index": ["DROP INDEX delivery_attempts_delivery"]
}

const pg = await startPostgres({ durable: true, maxConnections: 50 })
const url = pg.urlOf("postgres")

// The hub's migrations: start it once on the database, then stop it.
const port = 20_000 + Math.floor(Math.random() * 20_000)
// The source's migrations by default; `--hub` a built binary's.
const hubCommand = values.hub === undefined ? [process.execPath, "src/main.ts", "serve"] : [values.hub, "serve"]
const hub = Bun.spawn(hubCommand, {
  env: { ...process.env, PORT: String(port), HUB_DB: url, HUB_SECRET_KEY: randomBytes(32).toString("hex") },
  stdout: "ignore",
  stderr: "inherit"
})
for (let i = 0; i < 300; i++) {
  if (await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.ok, () => false)) break
  await Bun.sleep(50)
}
hub.kill("SIGTERM")
await hub.exited

const variant = VARIANTS[values.variant]
if (variant === undefined) throw new Error(`--variant is one of ${Object.keys(VARIANTS).join(", ")}`)
const db = new Bun.SQL({ url, max: 4 })
for (const statement of variant) await db.unsafe(statement)

/** A row for `table` with every NOT NULL column without a default filled in. */
const filler = async (table: string, given: Record<string, unknown>) => {
  const columns: Array<{ column_name: string; data_type: string }> = await db.unsafe(
    `SELECT column_name, data_type FROM information_schema.columns
      WHERE table_name = $1 AND is_nullable = 'NO' AND column_default IS NULL`,
    [table]
  )
  const row: Record<string, unknown> = { ...given }
  for (const c of columns) row[c.column_name] ??= c.data_type === "text" ? "x" : 0
  const names = Object.keys(row)
  await db.unsafe(
    `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map((_, i) => `$${i + 1}`).join(", ")})`,
    names.map((n) => row[n])
  )
}
const now = () => new Date().toISOString()
await filler("organizations", { id: "org_1" })
await filler("instances", { id: "ins_1", organization_id: "org_1", phone_number_id: "1", waba_id: "1" })
const webhooks = Array.from({ length: webhookCount }, (_, i) => `whk_${i}`)
for (const id of webhooks) {
  await filler("webhooks", { id, organization_id: "org_1", instance_id: "ins_1", active: 1, kind: "push" })
}

const cpuTicks = () => {
  let ticks = 0
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8")
      if (!stat.includes("(postgres)")) continue
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone meanwhile
    }
  }
  return ticks
}

const body = JSON.stringify({ object: "whatsapp_business_account", entry: [{ id: "1", changes: [] }] }).padEnd(400)
const EVENTS_PER_GROUP = 21
const LEASE = 256
let done = 0
let stop = false

const ingress = async () => {
  while (!stop) {
    const at = now()
    const events = Array.from({ length: EVENTS_PER_GROUP }, () => ({
      id: `evt_${Bun.randomUUIDv7()}`,
      instance_id: "ins_1",
      body,
      change_count: 1,
      received_at: at,
      traceparent: null
    }))
    const deliveries = events.flatMap((e) =>
      webhooks.map((w) => ({
        id: `dlv_${Bun.randomUUIDv7()}`,
        webhook_id: w,
        event_id: e.id,
        message_id: Bun.randomUUIDv7(),
        status: "pending",
        attempts: 0,
        next_attempt_at: at,
        lease_owner: null,
        lease_expires_at: null,
        created_at: at,
        updated_at: at,
        body: null,
        contact_key: null,
        contact_seq: null
      }))
    )
    const changes = events.map((e) => ({ dedupe_key: `${at}${Bun.randomUUIDv7()}`, event_id: e.id, received_at: at }))
    await db.begin(async (tx) => {
      await tx.unsafe(
        `INSERT INTO event_changes (dedupe_key, event_id, received_at) SELECT dedupe_key, event_id, received_at
          FROM json_populate_recordset(NULL::event_changes, $1::text::json) ON CONFLICT DO NOTHING`,
        [JSON.stringify(changes)]
      )
      await tx.unsafe(
        `WITH e AS (INSERT INTO events (id, instance_id, body, change_count, received_at, traceparent)
            SELECT id, instance_id, body, change_count, received_at, traceparent FROM json_populate_recordset(NULL::events, $1::text::json)),
          d AS (INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, lease_owner,
              lease_expires_at, created_at, updated_at, body, contact_key, contact_seq)
            SELECT id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, lease_owner,
              lease_expires_at, created_at, updated_at, body, contact_key, contact_seq FROM json_populate_recordset(NULL::deliveries, $2::text::json))
          SELECT 1`,
        [JSON.stringify(events), JSON.stringify(deliveries)]
      )
    })
    inserted += deliveries.length
    // The hub's ingress runs ahead of the dispatcher in overload; keep a backlog, not an ocean.
    while (!stop && backlog() > 20_000) await Bun.sleep(5)
  }
}
let inserted = 0
const backlog = () => inserted - done

const dispatch = async () => {
  while (!stop) {
    const at = now()
    const leased = await db.begin(async (tx) => {
      const due: Array<{ id: string }> = await tx.unsafe(
        `SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at IS NOT NULL AND next_attempt_at <= $1
          AND lease_owner IS NULL ORDER BY next_attempt_at LIMIT $2`,
        [at, LEASE * 4]
      )
      const ids = due.slice(0, LEASE).map((r) => r.id)
      if (ids.length === 0) return []
      return tx.unsafe(
        `WITH d AS (UPDATE deliveries SET lease_owner = 'r1', lease_expires_at = $2
            WHERE id IN (SELECT id FROM deliveries WHERE id = ANY($1::text[]) AND (lease_expires_at IS NULL OR lease_expires_at < $3)
              FOR UPDATE SKIP LOCKED) AND (lease_expires_at IS NULL OR lease_expires_at < $3) RETURNING *)
          SELECT d.id, d.attempts, COALESCE(d.body, e.body) AS body, w.url, w.secret_encrypted
            FROM d JOIN events e ON e.id = d.event_id JOIN webhooks w ON w.id = d.webhook_id`,
        [ids, new Date(Date.now() + 60_000).toISOString(), at]
      )
    })
    if (leased.length === 0) {
      await Bun.sleep(2)
      continue
    }
    const finished = now()
    const attempts = leased.map((row: { id: string }) => ({
      id: `att_${Bun.randomUUIDv7()}`,
      delivery_id: row.id,
      attempt: 1,
      started_at: finished,
      status_code: 200,
      latency_ms: 1,
      error: null,
      response_snippet: null
    }))
    const succeeded = leased.map((row: { id: string }) => ({
      id: row.id,
      owner: "r1",
      attempts: 1,
      status_code: 200,
      at: finished
    }))
    await db.begin(async (tx) => {
      await tx.unsafe(
        `WITH a AS (INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet)
            SELECT id, delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
              FROM json_populate_recordset(NULL::delivery_attempts, $1::text::json))
          UPDATE deliveries AS d SET status = 'succeeded', attempts = r.attempts, last_status_code = r.status_code,
            last_error = NULL, next_attempt_at = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = r.at
          FROM json_to_recordset($2::text::json) AS r(id text, owner text, attempts integer, status_code integer, at text)
          WHERE d.id = r.id AND d.lease_owner = r.owner`,
        [JSON.stringify(attempts), JSON.stringify(succeeded)]
      )
    })
    done += leased.length
  }
}

// Warm-up, then the measured window.
const workers = [ingress(), dispatch()]
await Bun.sleep(2_000)
const doneBefore = done
const ticksBefore = cpuTicks()
const started = performance.now()
await Bun.sleep(seconds * 1_000)
const ticks = cpuTicks() - ticksBefore
const delivered = done - doneBefore
const elapsed = (performance.now() - started) / 1_000
stop = true
await Promise.all(workers)
await db.close()
await pg.stop()
console.log(
  `${values.variant}: ${delivered} deliveries in ${elapsed.toFixed(1)} s (${
    Math.round(delivered / elapsed)
  }/s), PostgreSQL ${((ticks * 10_000) / Math.max(1, delivered)).toFixed(1)} µs of CPU a delivery`
)

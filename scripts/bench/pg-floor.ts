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
import { parseArgs } from "node:util"
import { DELIVERY_PATH_REFERENCES } from "../../src/Sql/migrations/0034_parent_checks.js"
import { constraintOf, type ParentReference } from "../../src/Sql/ParentChecks.js"
import { cpuTicks, cpuTicksByRole, hubDatabase, seedWebhooks } from "./HubDatabase.js"

const { values } = parseArgs({
  options: {
    hub: { type: "string" },
    seconds: { type: "string", default: "10" },
    variant: { type: "string", default: "as-is" },
    "in-flight": { type: "string", default: "1" },
    statements: { type: "boolean", default: false },
    collation: { type: "string" },
    webhooks: { type: "string", default: "12" }
  }
})
const seconds = Number(values.seconds)
const webhookCount = Number(values.webhooks)
// Leases whose attempts are still out when the next lease reads (the hub has up to 256 attempts in
// flight, HUB_DISPATCH_CONCURRENCY, so its due reads meet rows another round leased).
const leasesInFlight = Number(values["in-flight"])
const leaseTable = values.variant === "unlogged-leases"

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

/** The due index holding leased rows too (no `lease_owner` in its condition), and no index of leased rows. */
const DUE_HOLDS_LEASED = [
  "DROP INDEX deliveries_due",
  "DROP INDEX deliveries_leased",
  "CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at) WHERE next_attempt_at IS NOT NULL"
]

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
  // The lease changes no indexed column and no index's condition, so its update can stay on its page
  // without an index entry (HOT); the due index then holds leased rows too, which the read skips.
  "hot-lease": DUE_HOLDS_LEASED,
  "hot-lease-50": [...DUE_HOLDS_LEASED, "ALTER TABLE deliveries SET (fillfactor = 50)"],
  // Leases in a table of their own, not logged (a crash empties it: every lease then lapses, as
  // when its replica stops); the deliveries are written at their ingress and their outcome only.
  "unlogged-leases": [
    ...DUE_HOLDS_LEASED,
    "CREATE UNLOGGED TABLE delivery_leases (delivery_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at TEXT NOT NULL)"
  ],
  // Without the index that finds deliveries by their event (migration 0035: what deleting an event checks).
  "no-event-index": ["DROP INDEX deliveries_event"],
  "no-webhook-index": ["DROP INDEX deliveries_webhook"],
  "no-attempt-index": ["DROP INDEX delivery_attempts_delivery"]
}

const variant = VARIANTS[values.variant]
if (variant === undefined) throw new Error(`--variant is one of ${Object.keys(VARIANTS).join(", ")}`)
const database = await hubDatabase({
  engine: "postgres",
  hub: values.hub,
  collation: values.collation,
  settings: values.statements
    ? ["shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all", "track_io_timing=off"]
    : []
})
const { db } = database
for (const statement of variant) await db.unsafe(statement)
if (values.statements) await db.unsafe("CREATE EXTENSION pg_stat_statements")
const now = () => new Date().toISOString()
const webhooks = Array.from({ length: webhookCount }, (_, i) => `whk_${i}`)
await seedWebhooks(database, webhooks)

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
      const due: Array<{ id: string }> = leaseTable
        ? await tx.unsafe(
          `SELECT id FROM deliveries d WHERE status = 'pending' AND next_attempt_at IS NOT NULL AND next_attempt_at <= $1
            AND NOT EXISTS (SELECT 1 FROM delivery_leases l WHERE l.delivery_id = d.id AND l.expires_at >= $1)
            ORDER BY next_attempt_at LIMIT $2`,
          [at, LEASE * 4]
        )
        : values.variant.startsWith("hot-lease")
        ? await tx.unsafe(
          `SELECT id FROM (SELECT id, lease_expires_at FROM deliveries WHERE status = 'pending' AND next_attempt_at IS NOT NULL
            AND next_attempt_at <= $1 ORDER BY next_attempt_at LIMIT $2) AS front
            WHERE lease_expires_at IS NULL OR lease_expires_at < $1`,
          [at, LEASE * 4 + leasesInFlight * LEASE]
        )
        : await tx.unsafe(
          `SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_at IS NOT NULL AND next_attempt_at <= $1
            AND lease_owner IS NULL ORDER BY next_attempt_at LIMIT $2`,
          [at, LEASE * 4]
        )
      const ids = due.slice(0, LEASE).map((r) => r.id)
      if (ids.length === 0) return []
      if (leaseTable) {
        return tx.unsafe(
          `WITH l AS (INSERT INTO delivery_leases (delivery_id, owner, expires_at)
              SELECT id, 'r1', $2 FROM unnest($1::text[]) AS id ORDER BY id
              ON CONFLICT (delivery_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
                WHERE delivery_leases.expires_at < $3
              RETURNING delivery_id)
            SELECT d.id, d.attempts, COALESCE(d.body, e.body) AS body, w.url, w.secret_encrypted
              FROM l JOIN deliveries d ON d.id = l.delivery_id JOIN events e ON e.id = d.event_id
              JOIN webhooks w ON w.id = d.webhook_id WHERE d.status IN ('pending', 'failed')`,
          [ids, new Date(Date.now() + 60_000).toISOString(), at]
        )
      }
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
    out.push(leased)
    if (out.length > leasesInFlight) await finish(out.shift() ?? [])
  }
  for (const leased of out) await finish(leased)
}
/** Leases read, their attempts out. */
const out: Array<ReadonlyArray<{ id: string }>> = []

/** The outcome of a lease's attempts: every one succeeded. */
const finish = async (leased: ReadonlyArray<{ id: string }>) => {
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
    if (leaseTable) {
      return tx.unsafe(
        `WITH a AS (INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet)
            SELECT id, delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet
              FROM json_populate_recordset(NULL::delivery_attempts, $1::text::json)),
          r AS (SELECT * FROM json_to_recordset($2::text::json) AS r(id text, owner text, attempts integer, status_code integer, at text)),
          l AS (DELETE FROM delivery_leases l USING r WHERE l.delivery_id = r.id AND l.owner = r.owner RETURNING l.delivery_id)
          UPDATE deliveries AS d SET status = 'succeeded', attempts = r.attempts, last_status_code = r.status_code,
            last_error = NULL, next_attempt_at = NULL, updated_at = r.at
          FROM r JOIN l ON l.delivery_id = r.id WHERE d.id = r.id`,
        [JSON.stringify(attempts), JSON.stringify(succeeded)]
      )
    }
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

// Warm-up, then the measured window.
const workers = [ingress(), dispatch()]
await Bun.sleep(2_000)
const doneBefore = done
if (values.statements) await db.unsafe("SELECT pg_stat_statements_reset()")
const ticksBefore = cpuTicks()
const rolesBefore = cpuTicksByRole()
const started = performance.now()
await Bun.sleep(seconds * 1_000)
const ticks = cpuTicks() - ticksBefore
const rolesAfter = cpuTicksByRole()
const delivered = done - doneBefore
const elapsed = (performance.now() - started) / 1_000
stop = true
await Promise.all(workers)
const statements: Array<{ query: string; calls: string; exec: number; plan: number }> = values.statements
  ? await db.unsafe(
    `SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query, calls::text AS calls,
       total_exec_time AS exec, total_plan_time AS plan
       FROM pg_stat_statements WHERE total_exec_time > 0 ORDER BY total_exec_time DESC LIMIT 14`
  )
  : []
const [updates] = await db.unsafe(
  "SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE relname = 'deliveries'"
)
await database.stop()
console.log(
  `${values.variant}: ${delivered} deliveries in ${elapsed.toFixed(1)} s (${
    Math.round(delivered / elapsed)
  }/s), PostgreSQL ${
    ((ticks * 10_000) / Math.max(1, delivered)).toFixed(1)
  } µs of CPU a delivery; deliveries updated ${updates.upd} times, ${updates.hot} of them HOT`
)
for (const [role, after] of rolesAfter) {
  const spent = after - (rolesBefore.get(role) ?? 0)
  if (spent > 0) console.log(`  ${role}: ${((spent * 10_000) / Math.max(1, delivered)).toFixed(1)} µs a delivery`)
}
for (const row of statements) {
  const perDelivery = (ms: number) => ((ms * 1_000) / Math.max(1, done)).toFixed(1)
  console.log(`  ${perDelivery(row.exec)} µs exec, ${perDelivery(row.plan)} plan, ${row.calls} calls: ${row.query}`)
}

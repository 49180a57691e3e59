/**
 * What deleting old events costs with many deliveries kept: retention's event batch (500 events no
 * delivery names any more, src/Delivery/Retention.ts), whose check that no delivery still names them
 * is the cost: a read of the whole deliveries table without an index on their event (per event on
 * SQLite's built-in foreign key, per statement on PostgreSQL's check of migration 0034). The
 * database is the hub's schema (its migrations, or `--hub` a built binary's); the deliveries kept
 * are ten per event, finished. Figures: docs/PERFORMANCE.md, "Retention of events".
 *
 * With `--early-statuses N`, N statuses of messages no send made are kept too, spread over 30 days,
 * and one hourly pass of their retention is timed: the statement of the schema found (one DELETE
 * reading the table before migration 0036; batches of 500 through message_status_backlog_at after).
 *
 *   node_modules/.bin/bun scripts/bench/retention.ts [--db sqlite|postgres] [--deliveries 1000000] [--batches 3]
 *     [--early-statuses 0] [--hub <binary>]
 */
import { parseArgs } from "node:util"
import { hubDatabase, seedWebhooks } from "./HubDatabase.js"

const { values } = parseArgs({
  options: {
    db: { type: "string", default: "sqlite" },
    deliveries: { type: "string", default: "1000000" },
    batches: { type: "string", default: "3" },
    "early-statuses": { type: "string", default: "0" },
    hub: { type: "string" }
  }
})
const engine = values.db === "postgres" ? "postgres" : "sqlite"
const deliveries = Number(values.deliveries)
const batches = Number(values.batches)
const BATCH = 500
const WEBHOOKS = 10
/** The events to delete come first in id order (the oldest), then the events the deliveries name. */
const oldEvents = BATCH * batches
const keptEvents = Math.ceil(deliveries / WEBHOOKS)

const database = await hubDatabase({ engine, hub: values.hub })
const { db } = database
await seedWebhooks(database, Array.from({ length: WEBHOOKS }, (_, w) => `whk_${w}`))

/** Rows `from` to `to` - 1 of a generated range, written by `select` (which names the number `i`). */
const inserted =
  (table: string, columns: string, select: (i: string, id: (prefix: string, n: string) => string) => string) =>
  async (from: number, to: number) => {
    if (engine === "postgres") {
      const id = (prefix: string, n: string) => `'${prefix}_' || lpad((${n})::text, 10, '0')`
      await db.unsafe(
        `INSERT INTO ${table} (${columns}) SELECT ${select("i", id)} FROM generate_series($1::int, $2::int) AS i`,
        [
          from,
          to - 1
        ]
      )
    } else {
      const id = (prefix: string, n: string) => `printf('${prefix}_%010d', ${n})`
      await db.unsafe(
        `INSERT INTO ${table} (${columns}) WITH RECURSIVE n(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
          SELECT ${select("i", id)} FROM n`,
        [from, to - 1]
      )
    }
  }
const at = "'2026-01-01T00:00:00.000Z'"
const events = inserted(
  "events",
  "id, instance_id, body, change_count, received_at",
  (i, id) => `${id("evt", i)}, 'ins_1', '{}', 1, ${at}`
)
const finished = inserted(
  "deliveries",
  "id, webhook_id, event_id, message_id, status, attempts, created_at, updated_at",
  (i, id) =>
    `${id("dlv", i)}, 'whk_' || (${i} % ${WEBHOOKS}), ${id("evt", `${oldEvents} + ${i} / ${WEBHOOKS}`)}, ${
      id("msg", i)
    }, 'succeeded', 1, ${at}, ${at}`
)
const CHUNK = 100_000
for (let from = 0; from < oldEvents + keptEvents; from += CHUNK) {
  await events(from, Math.min(oldEvents + keptEvents, from + CHUNK))
}
for (let from = 0; from < deliveries; from += CHUNK) await finished(from, Math.min(deliveries, from + CHUNK))
await db.unsafe(engine === "postgres" ? "VACUUM ANALYZE" : "ANALYZE")

/** Whether the hub's migrations made the index `name`. */
const hasIndex = async (name: string) => {
  const [{ n } = { n: 0 }]: Array<{ n: number }> = await db.unsafe(
    engine === "postgres"
      ? "SELECT count(*)::int AS n FROM pg_indexes WHERE indexname = $1"
      : "SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND name = $1",
    [name]
  )
  return n > 0
}

// What migration 0035 costs an upgrade: the index built again over the deliveries kept (writes to
// deliveries wait meanwhile). Only where the hub's migrations made it.
let built = ""
if (await hasIndex("deliveries_event")) {
  await db.unsafe("DROP INDEX deliveries_event")
  const started = performance.now()
  await db.unsafe("CREATE INDEX deliveries_event ON deliveries (event_id)")
  built = `; deliveries_event built in ${(performance.now() - started).toFixed(0)} ms`
}

const timings: Array<number> = []
for (let b = 0; b < batches; b++) {
  const started = performance.now()
  await db.unsafe(`DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT ${BATCH})`)
  timings.push(performance.now() - started)
}

const earlyStatuses = Number(values["early-statuses"])
let earlyPass = ""
if (earlyStatuses > 0) {
  const start = Date.parse("2026-10-01T00:00:00Z")
  const step = (30 * 86_400_000) / earlyStatuses
  for (let from = 0; from < earlyStatuses; from += CHUNK) {
    const to = Math.min(earlyStatuses, from + CHUNK)
    const rows = Array.from({ length: to - from }, (_, k) => ({
      instance_id: "ins_1",
      wa_message_id: `wamid.${from + k}`,
      status: "delivered",
      status_rank: 2,
      status_at: new Date(start + (from + k) * step).toISOString(),
      error: null
    }))
    await db.unsafe(
      engine === "postgres"
        ? `INSERT INTO message_status_backlog SELECT * FROM json_populate_recordset(NULL::message_status_backlog, $1::text::json)`
        : `INSERT INTO message_status_backlog (instance_id, wa_message_id, status, status_rank, status_at, error)
            SELECT value ->> 'instance_id', value ->> 'wa_message_id', value ->> 'status', value ->> 'status_rank',
              value ->> 'status_at', value ->> 'error' FROM json_each($1)`,
      [JSON.stringify(rows)]
    )
  }
  await db.unsafe(engine === "postgres" ? "VACUUM ANALYZE message_status_backlog" : "ANALYZE")
  // The first hour's statuses are past the cutoff, as at an hourly pass.
  const cutoff = new Date(start + 3_600_000).toISOString()
  const batched = await hasIndex("message_status_backlog_at")
  const started = performance.now()
  let deleted = 0
  for (let last = 500; last === 500;) {
    const rows: Array<unknown> = await db.unsafe(
      batched
        ? `DELETE FROM message_status_backlog WHERE (instance_id, wa_message_id, status) IN (SELECT instance_id,
            wa_message_id, status FROM message_status_backlog WHERE status_at < $1 ORDER BY status_at LIMIT 500)
            RETURNING 1 AS n`
        : "DELETE FROM message_status_backlog WHERE status_at < $1 RETURNING 1 AS n",
      [cutoff]
    )
    last = batched ? rows.length : 0
    deleted += rows.length
  }
  earlyPass = `; ${earlyStatuses} early statuses kept: an hourly pass deleted ${deleted} in ${
    (performance.now() - started).toFixed(1)
  } ms (${batched ? "batches through message_status_backlog_at" : "one DELETE"})`
}

await database.stop()
console.log(
  `${engine}, ${deliveries} deliveries kept: a batch of ${BATCH} events deleted in ${
    timings.map((ms) => ms.toFixed(1)).join(", ")
  } ms${built}${earlyPass}`
)

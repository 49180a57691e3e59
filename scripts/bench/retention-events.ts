/**
 * What deleting old events costs with many deliveries kept: retention's event batch (500 events no
 * delivery names any more, src/Delivery/Retention.ts), whose check that no delivery still names them
 * is the cost: a read of the whole deliveries table without an index on their event (per event on
 * SQLite's built-in foreign key, per statement on PostgreSQL's check of migration 0034). The
 * database is the hub's schema (its migrations, or `--hub` a built binary's); the deliveries kept
 * are ten per event, finished. Figures: docs/PERFORMANCE.md, "Retention of events".
 *
 *   node_modules/.bin/bun scripts/bench/retention-events.ts [--db sqlite|postgres] [--deliveries 1000000] [--batches 3] [--hub <binary>]
 */
import { parseArgs } from "node:util"
import { hubDatabase, insertFilled } from "./HubDatabase.js"

const { values } = parseArgs({
  options: {
    db: { type: "string", default: "sqlite" },
    deliveries: { type: "string", default: "1000000" },
    batches: { type: "string", default: "3" },
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
await insertFilled(database, "organizations", { id: "org_1" })
await insertFilled(database, "instances", { id: "ins_1", organization_id: "org_1", phone_number_id: "1", waba_id: "1" })
for (let w = 0; w < WEBHOOKS; w++) {
  await insertFilled(database, "webhooks", {
    id: `whk_${w}`,
    organization_id: "org_1",
    instance_id: "ins_1",
    active: 1,
    kind: "push"
  })
}

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

// What migration 0035 costs an upgrade: the index built again over the deliveries kept (writes to
// deliveries wait meanwhile). Only where the hub's migrations made it.
const [{ n: indexed } = { n: 0 }]: Array<{ n: number }> = await db.unsafe(
  engine === "postgres"
    ? "SELECT count(*)::int AS n FROM pg_indexes WHERE indexname = 'deliveries_event'"
    : "SELECT count(*) AS n FROM sqlite_master WHERE type = 'index' AND name = 'deliveries_event'"
)
let built = ""
if (indexed > 0) {
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
await database.stop()
console.log(
  `${engine}, ${deliveries} deliveries kept: a batch of ${BATCH} events deleted in ${
    timings.map((ms) => ms.toFixed(1)).join(", ")
  } ms${built}`
)

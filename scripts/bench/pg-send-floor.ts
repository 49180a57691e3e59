/**
 * What PostgreSQL itself spends per synchronous send on the hub's own statements, without the hub:
 * the floor of the send's PostgreSQL part while the schema stays (the delivery's is pg-floor.ts).
 * Two connections (the hub's two group commits in flight, Sql/WriteBatcher.ts) each run, in one
 * transaction with its commit flushed: a group's `pending` records (Messages/Repo.ts,
 * outboundWriter: one JSON parameter), then the acceptance of the group before it (the advisory
 * locks on the upstream ids, then the `UPDATE … RETURNING` with the early statuses' check), each
 * group in its savepoint, as the hub's group writers do. PostgreSQL's CPU (every process of the
 * server) is divided by the sends accepted. `--variant` changes the schema to price its parts.
 *
 *   node_modules/.bin/bun scripts/bench/pg-send-floor.ts [--hub <binary>] [--seconds 10] [--variant as-is] [--group 24]
 *     [--fillfactor 70]   (the messages' fillfactor in the variants that make the acceptance HOT)
 */
import { parseArgs } from "node:util"
import { perStatementChecks } from "../../src/Sql/ParentChecks.js"
import { cpuTicks, hubDatabase, insertFilled } from "./HubDatabase.js"

const { values } = parseArgs({
  options: {
    hub: { type: "string" },
    seconds: { type: "string", default: "10" },
    variant: { type: "string", default: "as-is" },
    group: { type: "string", default: "24" },
    instances: { type: "string", default: "16" },
    fillfactor: { type: "string", default: "70" }
  }
})
const seconds = Number(values.seconds)
const groupSize = Number(values.group)
const instanceCount = Number(values.instances)
const fillfactor = Number(values.fillfactor)

const MESSAGE_REFERENCES = [
  { child: "messages", column: "instance_id", parent: "instances" },
  { child: "messages", column: "organization_id", parent: "organizations" }
]

/** The upstream id out of the messages' indexes (and their conditions), into a table of its own. */
const WA_IDS_TABLE = [
  "DROP INDEX messages_instance_wa_message",
  "DROP INDEX messages_unknown_outcome",
  "CREATE INDEX messages_unknown_outcome ON messages (instance_id, created_at, id) WHERE failure_reason = 'outcome_unknown'",
  `CREATE TABLE message_wa_ids (instance_id TEXT NOT NULL, wa_message_id TEXT NOT NULL, message_id TEXT NOT NULL,
    PRIMARY KEY (instance_id, wa_message_id))`
]

/** Schema changes priced one at a time, each applied after the hub's migrations. */
const VARIANTS: Record<string, ReadonlyArray<string>> = {
  "as-is": [],
  // The statement trigger that adds a row of counts per instance to message_counts (migration 0010).
  "no-count-trigger": ["DROP TRIGGER messages_count ON messages"],
  // The messages' two references checked once per statement, as the deliveries' are (migration 0034).
  "per-statement-checks": MESSAGE_REFERENCES.flatMap(perStatementChecks),
  "no-foreign-keys": MESSAGE_REFERENCES.map((ref) =>
    `ALTER TABLE ${ref.child} DROP CONSTRAINT ${ref.child}_${ref.column}_fkey`
  ),
  // The list's indexes by person and by organization.
  "no-list-indexes": ["DROP INDEX messages_party", "DROP INDEX messages_organization_created"],
  // The upstream id out of every index and index condition: the acceptance may then stay on its page (HOT). The
  // ceiling of keeping the id in a table of its own, which would add an insert with one index entry.
  "hot-acceptance": [
    "DROP INDEX messages_instance_wa_message",
    "DROP INDEX messages_unknown_outcome",
    `ALTER TABLE messages SET (fillfactor = ${fillfactor})`
  ],
  // The upstream id's lookup in a table of its own, filled by the acceptance (ACCEPT_BY_VARIANT): the record's
  // own update then names no indexed column and may stay on its page. Every reader by upstream id would join it.
  "wa-ids-table": [...WA_IDS_TABLE, `ALTER TABLE messages SET (fillfactor = ${fillfactor})`],
  // That table alone holds the upstream id: the acceptance inserts its rows and leaves the record as it is.
  // Every reader of the id, the list's columns included, would join it (by record: an index this leaves out).
  "wa-ids-only": WA_IDS_TABLE,
  // The schema as is, each group without its savepoint (see `savepoints` below).
  "no-savepoints": [],
  // Nothing but the records' insert and the acceptance (and their commits).
  "bare": [
    "DROP TRIGGER messages_count ON messages",
    ...MESSAGE_REFERENCES.map((ref) => `ALTER TABLE ${ref.child} DROP CONSTRAINT ${ref.child}_${ref.column}_fkey`),
    "DROP INDEX messages_party",
    "DROP INDEX messages_organization_created",
    "DROP INDEX messages_instance_wa_message"
  ]
}
// The savepoints each group runs in (the hub's group writers; a failing group rolls back alone).
const savepoints = values.variant !== "no-savepoints"

const variant = VARIANTS[values.variant]
if (variant === undefined) throw new Error(`--variant is one of ${Object.keys(VARIANTS).join(", ")}`)
const database = await hubDatabase({ engine: "postgres", hub: values.hub })
// Each statement unnamed, parsed and planned for its parameters every time, as the hub's driver
// sends it (Bun.SQL's own prepared statements, planned generically after five runs, gave 101–193 µs
// a send against 114 unnamed).
const db = new Bun.SQL({ url: database.url, max: 4, prepare: false })
for (const statement of variant) await db.unsafe(statement)
await insertFilled(database, "organizations", { id: "org_1" })
const instances = Array.from({ length: instanceCount }, (_, i) => `ins_${i}`)
for (const [i, id] of instances.entries()) {
  await insertFilled(database, "instances", {
    id,
    organization_id: "org_1",
    phone_number_id: String(1000 + i),
    waba_id: "1"
  })
}

const COLUMNS = [
  "id",
  "organization_id",
  "instance_id",
  "direction",
  "to_number",
  "type",
  "status",
  "created_at",
  "updated_at",
  "user_id",
  "category",
  "endpoint"
]
const INSERT = `INSERT INTO messages (${COLUMNS.join(", ")}) SELECT ${
  COLUMNS.join(", ")
} FROM json_populate_recordset(NULL::messages, $1::text::json)`
const LOCK = `SELECT pg_advisory_xact_lock(k.h) FROM (SELECT DISTINCT hashtextextended(n.value, 0) AS h
  FROM json_array_elements_text($1::text::json) AS n(value)) AS k ORDER BY k.h`
const ACCEPT = `UPDATE messages SET wa_message_id = a.value ->> 'wa', updated_at = $1
  FROM json_array_elements($2::text::json) AS a(value)
  WHERE messages.id = a.value ->> 'id' AND messages.id = ANY(ARRAY(SELECT json_array_elements_text($3::text::json)))
  RETURNING messages.id AS id, CASE WHEN EXISTS (SELECT 1 FROM message_status_backlog b
    WHERE b.instance_id = messages.instance_id AND b.wa_message_id = messages.wa_message_id) THEN 1 ELSE 0 END AS early`

/** The acceptances of the variants that keep the upstream id in a table of its own (same parameters). */
const ACCEPT_BY_VARIANT: Partial<Record<string, string>> = {
  // The update, and the ids' rows from what it returned, in one statement.
  "wa-ids-table": `WITH accepted AS (UPDATE messages SET wa_message_id = a.value ->> 'wa', updated_at = $1
    FROM json_array_elements($2::text::json) AS a(value)
    WHERE messages.id = a.value ->> 'id' AND messages.id = ANY(ARRAY(SELECT json_array_elements_text($3::text::json)))
    RETURNING messages.id, messages.instance_id, messages.wa_message_id),
    ids AS (INSERT INTO message_wa_ids (instance_id, wa_message_id, message_id)
      SELECT instance_id, wa_message_id, id FROM accepted)
    SELECT accepted.id AS id, CASE WHEN EXISTS (SELECT 1 FROM message_status_backlog b
      WHERE b.instance_id = accepted.instance_id AND b.wa_message_id = accepted.wa_message_id) THEN 1 ELSE 0 END AS early
    FROM accepted`,
  // The ids' rows only ($1 and $3 unused but bound, as for the others).
  "wa-ids-only": `WITH ids AS (INSERT INTO message_wa_ids (instance_id, wa_message_id, message_id)
      SELECT a.value ->> 'i', a.value ->> 'wa', a.value ->> 'id' FROM json_array_elements($2::text::json) AS a(value)
      WHERE $1::text IS NOT NULL AND $3::text IS NOT NULL
      RETURNING instance_id, wa_message_id, message_id)
    SELECT ids.message_id AS id, CASE WHEN EXISTS (SELECT 1 FROM message_status_backlog b
      WHERE b.instance_id = ids.instance_id AND b.wa_message_id = ids.wa_message_id) THEN 1 ELSE 0 END AS early
    FROM ids`
}
const acceptStatement = ACCEPT_BY_VARIANT[values.variant] ?? ACCEPT

let accepted = 0
let stop = false
let next = 0

const worker = async () => {
  let previous: ReadonlyArray<{ readonly id: string; readonly instance_id: string }> = []
  while (!stop) {
    const at = new Date().toISOString()
    const records = Array.from({ length: groupSize }, () => ({
      id: `msg_${Bun.randomUUIDv7()}`,
      organization_id: "org_1",
      instance_id: `ins_${next++ % instanceCount}`,
      direction: "outbound",
      to_number: String(15_550_000_000 + Math.floor(Math.random() * 1_000_000)),
      type: "text",
      status: "pending",
      created_at: at,
      updated_at: at,
      user_id: null,
      category: null,
      endpoint: "messages"
    }))
    const acceptances = previous.map((r) => ({ id: r.id, i: r.instance_id, wa: `wamid.${Bun.randomUUIDv7()}` }))
    await db.begin(async (tx) => {
      if (savepoints) await tx.unsafe("SAVEPOINT records")
      await tx.unsafe(INSERT, [JSON.stringify(records)])
      if (acceptances.length === 0) return
      if (savepoints) await tx.unsafe("SAVEPOINT acceptances")
      await tx.unsafe(LOCK, [JSON.stringify(acceptances.map((a) => a.wa))])
      await tx.unsafe(acceptStatement, [at, JSON.stringify(acceptances), JSON.stringify(acceptances.map((a) => a.id))])
    })
    accepted += acceptances.length
    previous = records
  }
}

// Warm-up, then the measured window.
const workers = [worker(), worker()]
await Bun.sleep(2_000)
const acceptedBefore = accepted
const ticksBefore = cpuTicks()
const started = performance.now()
await Bun.sleep(seconds * 1_000)
const ticks = cpuTicks() - ticksBefore
const sends = accepted - acceptedBefore
const elapsed = (performance.now() - started) / 1_000
stop = true
await Promise.all(workers)
const [updates] = await db.unsafe(
  "SELECT n_tup_upd::text AS upd, n_tup_hot_upd::text AS hot FROM pg_stat_user_tables WHERE relname = 'messages'"
)
await db.close()
await database.stop()
console.log(
  `${values.variant}: ${sends} sends in ${elapsed.toFixed(1)} s (${Math.round(sends / elapsed)}/s), PostgreSQL ${
    ((ticks * 10_000) / Math.max(1, sends)).toFixed(1)
  } µs of CPU a send; records updated ${updates.upd} times, ${updates.hot} of them HOT`
)

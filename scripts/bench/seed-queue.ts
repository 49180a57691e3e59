/**
 * Sets a stopped hub's send queue (SQLite) to hold exactly `total` queued sends, all due at `sendAt`
 * (epoch ms) and valid `validityMs` after: the sends already queued are rescheduled, then the excess
 * taken out (their records with them) or copies added. A copy repeats a queued send of the hub's own,
 * its record and its queue row, number by number in turn, each to its own person with its own text
 * ("bulk i" for i from `firstText`), so the fake upstream can tell a send made twice. bun:sqlite
 * directly, as seed-lists.ts: the queue scenario's deep backlogs would take minutes to queue through
 * the API, whose 202 rate the scenario measures by itself.
 * Usage: bun scripts/bench/seed-queue.ts '{"dbFile", "total", "sendAt", "validityMs", "firstText"}'
 * Prints `{"queued": N, "added": N, "removed": N, "seconds": s}`.
 */
import { Database } from "bun:sqlite"

interface SeedConfig {
  readonly dbFile: string
  readonly total: number
  readonly sendAt: number
  readonly validityMs: number
  readonly firstText: number
}

type Row = Record<string, string | number | null>

const config: SeedConfig = JSON.parse(process.argv[2] ?? "{}")
const started = performance.now()
const db = new Database(config.dbFile)
db.run("PRAGMA synchronous = OFF")

const sendAtIso = new Date(config.sendAt).toISOString()
const expiresAt = config.sendAt + config.validityMs
const expiresAtIso = new Date(expiresAt).toISOString()
let added = 0
let removed = 0

db.transaction(() => {
  db.run(
    `UPDATE send_queue SET send_at = ?, due_at = ?, expires_at = ?, state = 'queued', lease_owner = NULL,
    lease_until = NULL`,
    [config.sendAt, config.sendAt, expiresAt]
  )
  db.run(
    `UPDATE messages SET send_at = ?, expires_at = ? WHERE id IN (SELECT message_id FROM send_queue)`,
    [sendAtIso, expiresAtIso]
  )
  const queued = (db.query("SELECT COUNT(*) AS n FROM send_queue").get() as { n: number }).n
  if (queued > config.total) {
    const excess = db.query("SELECT message_id FROM send_queue ORDER BY seq DESC LIMIT ?").all(
      queued - config.total
    ) as Array<
      { message_id: string }
    >
    const dropQueued = db.prepare("DELETE FROM send_queue WHERE message_id = ?")
    const dropRecord = db.prepare("DELETE FROM messages WHERE id = ?")
    for (const { message_id } of excess) {
      dropQueued.run(message_id)
      dropRecord.run(message_id)
    }
    removed = excess.length
    return
  }
  // One queued send of each number, with its record, as the template of its copies.
  const templates = db.query(
    `SELECT q.* FROM send_queue q WHERE q.seq IN (SELECT MIN(seq) FROM send_queue GROUP BY phone_number_id)`
  ).all() as Array<Row>
  if (templates.length === 0) throw new Error("no queued send to copy: queue one of each number first")
  const records = new Map<string, Row>()
  for (const template of templates) {
    records.set(
      String(template.message_id),
      db.query("SELECT * FROM messages WHERE id = ?").get(String(template.message_id)) as Row
    )
  }
  const queueColumns = Object.keys(templates[0]!).filter((column) => column !== "seq")
  const recordColumns = Object.keys(records.values().next().value!)
  const insertQueued = db.prepare(
    `INSERT INTO send_queue (${queueColumns.join(", ")}) VALUES (${queueColumns.map(() => "?").join(", ")})`
  )
  const insertRecord = db.prepare(
    `INSERT INTO messages (${recordColumns.join(", ")}) VALUES (${recordColumns.map(() => "?").join(", ")})`
  )
  const createdAt = new Date().toISOString()
  for (let i = 0; i < config.total - queued; i++) {
    const template = templates[i % templates.length]!
    const record = records.get(String(template.message_id))!
    const n = config.firstText + i
    const id = `msg_seed-${String(n).padStart(10, "0")}`
    const to = String(17_770_000_000 + n)
    const body = JSON.parse(String(template.body))
    body.to = to
    body.text = { body: `bulk ${n}` }
    const queuedRow: Row = { ...template, message_id: id, party: to, body: JSON.stringify(body) }
    const recordRow: Row = { ...record, id, to_number: to, created_at: createdAt, updated_at: createdAt }
    insertQueued.run(...queueColumns.map((column) => queuedRow[column] ?? null))
    insertRecord.run(...recordColumns.map((column) => recordRow[column] ?? null))
  }
  added = config.total - queued
})()
db.run("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
console.log(JSON.stringify({ queued: config.total, added, removed, seconds: (performance.now() - started) / 1000 }))

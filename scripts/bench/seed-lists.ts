/**
 * Seeds a stopped hub's SQLite database with generated history for the list scenario: `messages`
 * message records of one instance (statuses and directions mixed as a busy number's are, over 100
 * days) and `deliveries` delivery rows of one webhook (mostly succeeded, some failed or dead), in
 * time order as the hub writes them. bun:sqlite directly: this is test data, written once, fast.
 * Usage: bun scripts/bench/seed-lists.ts '{"dbFile", "organizationId", "instanceId", "webhookId", "messages", "deliveries"}'
 * Prints `{"middleCursor": "..."}`: the place of the middle record, for a deep cursor page.
 */
import { Database } from "bun:sqlite"

interface SeedConfig {
  readonly dbFile: string
  readonly organizationId: string
  readonly instanceId: string
  readonly webhookId: string
  readonly messages: number
  readonly deliveries: number
}

const config: SeedConfig = JSON.parse(process.argv[2] ?? "{}")
const db = new Database(config.dbFile)
db.run("PRAGMA synchronous = OFF")
db.run("PRAGMA foreign_keys = ON")

const START = Date.parse("2026-08-01T00:00:00.000Z")
const SPAN = 100 * 86_400_000
const at = (i: number, count: number) => new Date(START + Math.floor((i / count) * SPAN)).toISOString()
const id = (prefix: string, i: number) => `${prefix}_seed${String(i).padStart(9, "0")}`

/** A busy number's mix: most read, some delivered, a few sent or failed; a fifth inbound. */
const statusOf = (i: number) => {
  const n = i % 100
  return n < 88 ? "read" : n < 96 ? "delivered" : n < 99 ? "sent" : "failed"
}

const insertMessage = db.prepare(
  `INSERT INTO messages (id, organization_id, instance_id, direction, wa_message_id, to_number,
  from_number, type, status, error, status_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'text', ?, NULL, ?, ?, ?)`
)
db.transaction(() => {
  for (let i = 0; i < config.messages; i++) {
    const inbound = i % 5 === 0
    const created = at(i, config.messages)
    insertMessage.run(
      id("msg", i),
      config.organizationId,
      config.instanceId,
      inbound ? "inbound" : "outbound",
      `wamid.seed${i}`,
      inbound ? null : "15551234567",
      inbound ? "15557654321" : null,
      inbound ? "delivered" : statusOf(i),
      created,
      created,
      created
    )
  }
})()

const eventId = "evt_seed"
db.prepare("INSERT INTO events (id, instance_id, body, change_count, received_at) VALUES (?, ?, ?, 1, ?)")
  .run(eventId, config.instanceId, JSON.stringify({ object: "whatsapp_business_account", entry: [] }), at(0, 1))
const insertDelivery = db.prepare(
  `INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, next_attempt_at,
  last_status_code, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)`
)
db.transaction(() => {
  for (let i = 0; i < config.deliveries; i++) {
    const created = at(i, config.deliveries)
    const n = i % 100
    const [status, code] = n < 97 ? ["succeeded", 200] : n < 99 ? ["failed", 500] : ["dead", 500]
    insertDelivery.run(
      id("dlv", i),
      config.webhookId,
      eventId,
      id("msg_d", i),
      status,
      status === "succeeded" ? 1 : 10,
      code,
      created,
      created
    )
  }
})()
db.run("ANALYZE")
const middle = Math.floor(config.messages / 2)
console.log(
  JSON.stringify({
    middleCursor: Buffer.from(`${at(middle, config.messages)}|${id("msg", middle)}`).toString("base64url")
  })
)
db.close()

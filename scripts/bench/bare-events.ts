/**
 * The events baseline: the hub's event path written bare, as the bare `Bun.serve` is for /health and
 * the direct upstream for sends. It opens the database the hub just used (its schema, instances and
 * webhooks) and does the hub's work with the hub's own plain functions (signature check, envelope
 * parsing, dedupe key, per-instance envelope, webhook signature, kept-alive sender), but with
 * bun:sqlite called directly and no Effect: posts are committed in groups (one transaction per
 * tick: the change keys, the events, the status backlog, one delivery row per webhook written leased)
 * before their 200, each delivery is posted and its attempt logged in a group commit 5 ms later.
 * It is a ceiling, not an equal: no retries, no address check, no timeouts, no lease rounds (every
 * delivery is held in memory until sent), and SQLite checkpoints inside its commits.
 * Usage: bun scripts/bench/bare-events.ts '{"dbFile": "...", "appSecret": "..."}'. Prints its port.
 */
import { Database, type SQLQueryBindings } from "bun:sqlite"
import { randomBytes } from "node:crypto"
import { makeSender, NoAnswer } from "../../src/Delivery/Sender.js"
import { webhookSignature } from "../../src/Delivery/Signing.js"
import { parseJsonObject } from "../../src/Domain/Json.js"
import { dedupeKey, envelopeFor, parseEnvelope, type UpstreamChange } from "../../src/UpstreamEvents/Envelope.js"
import { verifyHubSignature } from "../../src/UpstreamEvents/HubSignature.js"

interface BareConfig {
  readonly dbFile: string
  readonly appSecret: string
}

const config: BareConfig = JSON.parse(process.argv[2] ?? "{}")
const db = new Database(config.dbFile)
db.run("PRAGMA busy_timeout = 5000")
db.run("PRAGMA synchronous = FULL")
db.run("PRAGMA foreign_keys = ON")

const OWNER = "bare-events"
const CONCURRENCY = 256
/** Rows per multi-row statement. */
const CHUNK = 64

interface Webhook {
  readonly id: string
  readonly url: string
  readonly hostHeader: string
  readonly key: Uint8Array
}

/** Instances by phone number id, with their active webhooks: read once (the hub reads them per group). */
const routes = new Map<string, { readonly instanceId: string; readonly webhooks: Array<Webhook> }>()
const rows = db.query<
  { instance_id: string; phone_number_id: string; webhook_id: string | null; url: string | null },
  []
>(
  `SELECT i.id AS instance_id, i.phone_number_id, w.id AS webhook_id, w.url FROM instances i
     LEFT JOIN webhooks w ON w.instance_id = i.id AND w.active = 1 AND w.deleted_at IS NULL`
).all()
for (const row of rows) {
  const route = routes.get(row.phone_number_id) ?? { instanceId: row.instance_id, webhooks: [] }
  // A key of the webhook's size: the hub decrypts each secret once and keeps the key, so this costs it nothing either.
  if (row.webhook_id !== null && row.url !== null) {
    route.webhooks.push({ id: row.webhook_id, url: row.url, hostHeader: new URL(row.url).host, key: randomBytes(24) })
  }
  routes.set(row.phone_number_id, route)
}

const newId = (prefix: string) => `${prefix}_${Bun.randomUUIDv7()}`
const chunks = <A>(items: ReadonlyArray<A>): Array<ReadonlyArray<A>> => {
  const out: Array<ReadonlyArray<A>> = []
  for (let i = 0; i < items.length; i += CHUNK) out.push(items.slice(i, i + CHUNK))
  return out
}
/** A multi-row statement for `rowCount` rows of `columns` values each (Bun caches it by its text). */
const multiRow = <Row = unknown>(head: string, columns: number, rowCount: number, tail = "") =>
  db.query<Row, Array<SQLQueryBindings>>(
    `${head} VALUES ${
      Array.from({ length: rowCount }, () => `(${Array.from({ length: columns }, () => "?").join(",")})`).join(",")
    } ${tail}`
  )

interface Change {
  readonly instanceId: string
  readonly key: string
  readonly change: UpstreamChange
  readonly webhooks: ReadonlyArray<Webhook>
}
interface Post {
  readonly object: string
  readonly changes: ReadonlyArray<Change>
  readonly answer: (response: Response) => void
}
interface Delivery {
  readonly id: string
  readonly messageId: string
  readonly body: string
  readonly webhook: Webhook
}
interface Attempt {
  readonly delivery: Delivery
  readonly startedAt: string
  readonly statusCode: number | null
  readonly latencyMs: number
  readonly error: string | null
}

let posts: Array<Post> = []
const queued: Array<Delivery> = []
let inFlight = 0
let attempts: Array<Attempt> = []

/** One transaction for every post that arrived in this tick; each is answered after the commit. */
const commitPosts = () => {
  const group = posts
  posts = []
  const now = new Date().toISOString()
  const events = group.flatMap((post) =>
    post.changes.map((change) => ({
      ...change,
      eventId: newId("evt"),
      body: envelopeFor(post.object, [change.change])
    }))
  )
  const deliveries: Array<Delivery & { readonly eventId: string }> = []
  db.run("BEGIN IMMEDIATE")
  try {
    const fresh = new Set<string>()
    for (const chunk of chunks(events)) {
      const accepted = multiRow<{ readonly dedupe_key: string }>(
        "INSERT INTO event_changes (dedupe_key, event_id, received_at)",
        3,
        chunk.length,
        "ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key"
      )
        .all(...chunk.flatMap((e) => [e.key, e.eventId, now]))
      for (const row of accepted) fresh.add(row.dedupe_key)
    }
    const stored = events.filter((e) => fresh.has(e.key))
    const statuses = stored.flatMap((e) => {
      const list = e.change.value.statuses
      return Array.isArray(list)
        ? list.flatMap((
          s
        ) => (typeof s === "object" && s !== null && !Array.isArray(s)
          ? [{ instanceId: e.instanceId, status: s }]
          : [])
        )
        : []
    })
    // As the hub: look the statuses' messages up, and keep those not known yet (all, here) for their send.
    db.query(
      `SELECT m.id FROM json_each(?) AS c JOIN messages m ON m.instance_id = c.value ->> 'i' AND m.wa_message_id = c.value ->> 'w'`
    )
      .all(JSON.stringify(statuses.map((s) => ({ i: s.instanceId, w: String(s.status.id) }))))
    for (const chunk of chunks(statuses)) {
      multiRow(
        "INSERT INTO message_status_backlog (instance_id, wa_message_id, status, status_rank, status_at, error)",
        6,
        chunk.length,
        "ON CONFLICT (instance_id, wa_message_id, status) DO NOTHING"
      )
        .run(...chunk.flatMap((s) => [s.instanceId, String(s.status.id), String(s.status.status), 1, now, null]))
    }
    for (const chunk of chunks(stored)) {
      multiRow("INSERT INTO events (id, instance_id, body, change_count, received_at)", 5, chunk.length).run(
        ...chunk.flatMap((e) => [e.eventId, e.instanceId, e.body, 1, now])
      )
    }
    for (const e of stored) {
      for (const webhook of e.webhooks) {
        deliveries.push({ id: newId("dlv"), messageId: newId("msg"), body: e.body, webhook, eventId: e.eventId })
      }
    }
    for (const chunk of chunks(deliveries)) {
      multiRow(
        "INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, next_attempt_at, lease_owner, lease_expires_at, created_at, updated_at)",
        11,
        chunk.length
      ).run(
        ...chunk.flatMap((
          d
        ) => [
          d.id,
          d.webhook.id,
          d.eventId,
          d.messageId,
          "pending",
          0,
          now,
          OWNER,
          "9999-12-31T00:00:00.000Z",
          now,
          now
        ])
      )
    }
    db.run("COMMIT")
  } catch (error) {
    db.run("ROLLBACK")
    for (const post of group) post.answer(Response.json({ statusCode: 500, message: String(error) }, { status: 500 }))
    return
  }
  for (const post of group) post.answer(Response.json({ accepted: post.changes.length }))
  queued.push(...deliveries)
  startAttempts()
}

const sender = makeSender({ maxIdlePerOrigin: CONCURRENCY, maxPerOrigin: CONCURRENCY })
const never = new AbortController().signal

const attempt = async (delivery: Delivery) => {
  const started = Date.now()
  const timestamp = Math.floor(started / 1000)
  const answer = await sender.send({
    target: { url: delivery.webhook.url, hostHeader: delivery.webhook.hostHeader, serverName: undefined },
    body: delivery.body,
    timeoutMs: 20_000,
    signal: never,
    headers: {
      "content-type": "application/json",
      "webhook-id": delivery.messageId,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": webhookSignature([delivery.webhook.key], delivery.messageId, timestamp, delivery.body)
    }
  })
  const received = answer instanceof NoAnswer ? undefined : answer
  if (attempts.length === 0) setTimeout(logAttempts, 5)
  attempts.push({
    delivery,
    startedAt: new Date(started).toISOString(),
    statusCode: received?.status ?? null,
    latencyMs: Date.now() - started,
    error: answer instanceof NoAnswer ? answer.message : null
  })
  inFlight--
  startAttempts()
}

const startAttempts = () => {
  while (inFlight < CONCURRENCY && queued.length > 0) {
    const next = queued.shift()
    if (next === undefined) return
    inFlight++
    void attempt(next)
  }
}

/** Logs the finished attempts and moves their deliveries on, in one transaction. */
const logAttempts = () => {
  const group = attempts
  attempts = []
  const now = new Date().toISOString()
  db.run("BEGIN IMMEDIATE")
  for (const chunk of chunks(group)) {
    multiRow(
      "INSERT INTO delivery_attempts (id, delivery_id, attempt, started_at, status_code, latency_ms, error, response_snippet)",
      8,
      chunk.length
    )
      .run(
        ...chunk.flatMap((a) => [newId("att"), a.delivery.id, 1, a.startedAt, a.statusCode, a.latencyMs, a.error, ""])
      )
    db.query(`UPDATE deliveries SET status = 'succeeded', attempts = 1, last_status_code = 200, next_attempt_at = NULL,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id IN (${
      chunk.map(() => "?").join(",")
    }) AND lease_owner = ?`)
      .run(now, ...chunk.map((a) => a.delivery.id), OWNER)
  }
  db.run("COMMIT")
}

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  routes: {
    "/upstream/events": {
      POST: async (request) => {
        const raw = new Uint8Array(await request.arrayBuffer())
        if (!verifyHubSignature(config.appSecret, raw, request.headers.get("x-hub-signature-256") ?? undefined)) {
          return Response.json({ statusCode: 401, message: "Unauthorized" }, { status: 401 })
        }
        const payload = parseJsonObject(new TextDecoder().decode(raw))
        const envelope = payload === undefined ? undefined : parseEnvelope(payload)
        if (envelope === undefined || envelope._tag === "Left") {
          return Response.json({ statusCode: 400, message: "Malformed envelope" }, { status: 400 })
        }
        const changes = envelope.right.changes.flatMap((change): Array<Change> => {
          const route = change.phoneNumberId === undefined ? undefined : routes.get(change.phoneNumberId)
          return route === undefined
            ? []
            : [{
              instanceId: route.instanceId,
              key: dedupeKey(route.instanceId, change),
              change,
              webhooks: route.webhooks
            }]
        })
        return new Promise<Response>((answer) => {
          if (posts.length === 0) setImmediate(commitPosts)
          posts.push({ object: envelope.right.object, changes, answer })
        })
      }
    }
  },
  fetch: () => Response.json({ statusCode: 404, message: "Not Found" }, { status: 404 })
})
console.log(JSON.stringify({ port: server.port }))

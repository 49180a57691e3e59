/**
 * Queued sends across a fleet and through crashes (issue 32, point 6), against a recording fake Graph:
 *
 * - Three replicas in this process on one PostgreSQL database drain one queue: every send is made once.
 * - A hub process killed with SIGKILL while its queued sends are in the Graph call, leased in the
 *   pacing and queued, on SQLite (restarted on its file) and on PostgreSQL (two other replicas take
 *   over): every send ends made exactly once or failed as outcome_unknown (its one call may have
 *   reached Meta), none is lost, none is made twice, each outcome is told once.
 * - The lease's edges, each made to happen on purpose: a send leased in the pacing longer than its
 *   lease, or cancelled while leased; two replicas recovering one lost lease at once; a hub killed
 *   while the Graph's acceptance waits for its commit.
 *
 * A lease lasts LEASE_MS (60 s, SendQueue/Drainer.ts), which no setting changes: in-process hubs move
 * their clock past it (ShiftedClock), and a dead hub process's leases are moved back by it in the
 * database rather than waited out.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Duration, Effect, Fiber, Layer, Option, Redacted, Schedule, Stream } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TokensRepoLive } from "../src/ApiTokens/Repo.js"
import { newId } from "../src/Domain/Ids.js"
import { InstancesRepoLive } from "../src/Instances/Repo.js"
import { Metrics } from "../src/Metrics/Metrics.js"
import { SendQueueDrainer } from "../src/SendQueue/Drainer.js"
import { SendQueueRepo } from "../src/SendQueue/Repo.js"
import { SqlLive } from "../src/Sql/Client.js"
import { SecretCipher } from "../src/Sql/SecretCipher.js"
import { WriteBatcherLive } from "../src/Sql/WriteBatcher.js"
import { type Engine, engines, freshPostgresDatabase, testDatabase } from "./support/Databases.js"
import { FakeGraph, fakeGraphLayer, type RecordedRequest, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { type HubProcess, startHubProcess } from "./support/HubProcess.js"
import { ShiftedClock, shiftedClockLayer } from "./support/ShiftedClock.js"
import { untilSignalledThat } from "./support/Signals.js"
import { itemsOf, parseObject, seedTenant, type Tenant, TestHub, testHub, testHubConfig } from "./support/TestHub.js"

/** The text bodies of the message posts the fake Graph received, in order. */
const sentTexts = (requests: ReadonlyArray<RecordedRequest>): ReadonlyArray<string> =>
  requests.flatMap((request) => {
    if (request.method !== "POST" || !request.path.endsWith("/messages")) return []
    const json = request.json
    if (typeof json !== "object" || json === null || !("text" in json)) return []
    const text = json.text
    return typeof text === "object" && text !== null && "body" in text && typeof text.body === "string"
      ? [text.body]
      : []
  })

/** How many times each text reached the Graph. */
const callsByText = (requests: ReadonlyArray<RecordedRequest>) => {
  const calls = new Map<string, number>()
  for (const text of sentTexts(requests)) calls.set(text, (calls.get(text) ?? 0) + 1)
  return calls
}

/** A stored event's body that tells a queue outcome (its outcome is stored after the row leaves the queue). */
const QUEUE_EVENT_BODY = `{"object":"hub.message_queue"%`

const isRecord = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** The queue outcomes (hub.message_queue) an event's body tells: message, status and wamid or reason. */
const queueOutcomes = (
  body: string
): ReadonlyArray<Readonly<Record<string, unknown>> & { readonly message_id: string }> => {
  const event = parseObject(body)
  if (event.object !== "hub.message_queue") return []
  return itemsOf(event, "entry").flatMap((entry) =>
    itemsOf(entry, "changes").flatMap((change) => {
      const value = change.value
      if (!isRecord(value)) return []
      const { failure_reason, message_id, status, wa_message_id } = value
      return [{
        message_id: String(message_id),
        status,
        ...(wa_message_id === undefined ? {} : { wa_message_id }),
        ...(failure_reason === undefined ? {} : { failure_reason })
      }]
    })
  )
}

/** A distinct recipient per send: one person's sends go one at a time within Meta's pair rate. */
const recipient = (i: number) => String(16505550000 + i)

describe("queued sends on a fleet of three replicas on PostgreSQL", () => {
  it.live(
    "300 sends queued through three replicas' servers, three numbers: each reaches the Graph once, every record is accepted, the queue ends empty",
    () =>
      Effect.gen(function*() {
        const graph = yield* Layer.build(fakeGraphLayer)
        const fake = Context.get(graph, FakeGraph)
        const url = yield* freshPostgresDatabase
        const replica = () =>
          Layer.build(testHub({
            engine: "postgres",
            databaseFile: url,
            upstream: "graph",
            graphUrl: fake.baseUrl
          }))
        const replicas = [yield* replica(), yield* replica(), yield* replica()]
        const [a] = replicas
        if (a === undefined) return yield* Effect.dieMessage("three replicas")
        const tenants = yield* Effect.provide(Effect.all([seedTenant(), seedTenant(), seedTenant()]), a)
        const count = 300
        const texts = Array.from({ length: count }, (_, i) => `fleet send ${i}`)
        const answers = yield* Effect.forEach(texts, (text, i) => {
          const tenant = tenants[i % 3] ?? tenants[0]
          const on = replicas[Math.floor(i / tenants.length) % replicas.length] ?? a
          return Effect.provide(
            Effect.flatMap(TestHub, (hub) =>
              hub.request("POST", "/api/messages", {
                token: tenant?.instanceToken ?? "",
                headers: { prefer: "respond-async" },
                json: { to: recipient(i), type: "text", text: { body: text } }
              })),
            on
          )
        }, { concurrency: 12 })
        expect(answers.map((answer) => answer.status)).toEqual(texts.map(() => 202))
        expect(new Set(answers.map((answer) => answer.body.id)).size).toBe(count)

        // Each replica counts the sends it ended; the checks run again as any of them ends one.
        const drainers = replicas.map((context) => Context.get(context, SendQueueDrainer))
        const sql = Context.get(a, SqlClient.SqlClient)
        const outcome = Effect.all({
          accepted: sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM messages
          WHERE wa_message_id IS NOT NULL`,
          queued: sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM send_queue`
        })
        yield* untilSignalledThat(
          Stream.mergeAll(drainers.map((drainer) => drainer.settled), { concurrency: "unbounded" }),
          "every queued send accepted and the queue empty",
          outcome,
          ({ accepted, queued }) => accepted[0]?.n === count && queued[0]?.n === 0,
          // Four seconds' sends of each number at its level, and room for a loaded machine.
          Duration.seconds(30)
        )

        // Each text reached the Graph exactly once, from the number it was queued for.
        const requests = yield* fake.requests
        const calls = callsByText(requests)
        expect(calls.size).toBe(count)
        expect([...calls.entries()].filter(([, n]) => n !== 1)).toEqual([])
        expect(texts.every((text) => calls.get(text) === 1)).toBe(true)
        for (const [i, tenant] of tenants.entries()) {
          const mine = sentTexts(requests.filter((r) => r.path.endsWith(`/${tenant.phoneNumberId}/messages`)))
          expect(new Set(mine)).toEqual(new Set(texts.filter((_, j) => j % tenants.length === i)))
        }
        // Every record has the wamid of its one send, and none failed.
        const records = yield* sql<
          { readonly id: string; readonly status: string; readonly wa_message_id: string | null }
        >`SELECT id, status, wa_message_id FROM messages`
        expect(records).toHaveLength(count)
        expect(new Set(records.map((record) => record.id))).toEqual(new Set(answers.map((answer) => answer.body.id)))
        expect(records.filter((record) => record.status === "failed" || record.wa_message_id === null)).toEqual([])
        expect(new Set(records.map((record) => record.wa_message_id)).size).toBe(count)
        // Each send ended on one replica: between them exactly the 300, and more than one replica made sends.
        const ended = yield* Effect.forEach(drainers, (drainer) => Stream.runHead(drainer.settled))
        const perReplica = ended.map((n) => n._tag === "Some" ? n.value : 0)
        expect(perReplica.reduce((sum, n) => sum + n, 0)).toBe(count)
        expect(perReplica.filter((n) => n > 0).length).toBeGreaterThan(1)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})

/** The key for secrets at rest the test and its hub processes share (64 hex characters for HUB_SECRET_KEY). */
const SECRET_KEY = new Uint8Array(32).fill(7)
const SECRET_KEY_HEX = "07".repeat(32)

/**
 * The hub processes' send rate (HUB_SEND_RATE): a lease takes a quarter second's worth, 2 sends of a
 * number, and past the first second's burst each send waits 200 ms in the pacing, leased.
 */
const RATE = 5

/** The length of a lease (Drainer.ts LEASE_MS), which no setting changes. */
const LEASE_MS = 60_000

/** A database for hub processes on `engine`: a SQLite file in a folder of its own, or a fresh PostgreSQL database. */
const processDatabase = (engine: Engine) =>
  engine === "postgres" ? freshPostgresDatabase : Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "hub-queue-crash-"))),
    (folder) => Effect.sync(() => rmSync(folder, { recursive: true, force: true }))
  ).pipe(Effect.map((folder) => join(folder, "hub.sqlite")))

/**
 * The database as this process sees it, beside the hub processes: migrated, with the repositories
 * that seed tenants (their access tokens encrypted with the processes' key) and an SqlClient to read
 * the queue (SQLite's WAL lets it read while a hub process writes).
 */
const besideTheHub = (databaseFile: string) =>
  Layer.mergeAll(TokensRepoLive, InstancesRepoLive).pipe(
    Layer.provide(SecretCipher.Default),
    Layer.provideMerge(SqlLive),
    Layer.provide(testHubConfig({ databaseFile, secretKey: Option.some(Redacted.make(SECRET_KEY)) }))
  )

/**
 * What a test of hub processes starts from: a recording fake Graph, a database on `engine` seen from
 * this process (`local`, `sql`), and the environment the processes start with.
 */
const forHubProcesses = (engine: Engine) =>
  Effect.gen(function*() {
    const fake = Context.get(yield* Layer.build(fakeGraphLayer), FakeGraph)
    const databaseFile = yield* processDatabase(engine)
    const local = yield* Layer.build(besideTheHub(databaseFile))
    const env = {
      HUB_DB: databaseFile,
      HUB_DB_POOL_SIZE: "4",
      HUB_UPSTREAM: "graph",
      HUB_GRAPH_URL: fake.baseUrl,
      HUB_APP_SECRET: "queue-crash-app-secret",
      HUB_SECRET_KEY: SECRET_KEY_HEX,
      HUB_LOG_FORMAT: "json"
    }
    return { fake, local, sql: Context.get(local, SqlClient.SqlClient), env }
  })

/**
 * The fake Graph accepts the number's next send (answering `wamid`) only once the test releases the
 * answer (`Deferred.succeed`): until then the call is in the Graph.
 */
const heldAcceptance = (fake: FakeGraph["Type"], phoneNumberId: string, wamid: string) =>
  Effect.gen(function*() {
    const answer = yield* Deferred.make<void>()
    yield* fake.respond({ method: "POST", path: `/${phoneNumberId}/messages` }, {
      after: Effect.runPromise(Deferred.await(answer)),
      body: {
        messaging_product: "whatsapp",
        contacts: [{ input: recipient(0), wa_id: recipient(0) }],
        messages: [{ id: wamid }]
      }
    }, 1)
    return answer
  })

/** A send's claim before its Graph call (SendQueue/Repo.ts claimWriter), as an effect. */
const claimSending = (repo: SendQueueRepo, messageId: string, owner: string, leaseUntil: number) =>
  Effect.flatten(Effect.promise(() => repo.claimSendingNow(messageId, owner, leaseUntil)))

/** One request to a hub process, its JSON object answer. */
const call = (hub: HubProcess, method: string, path: string, token: string, json?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${hub.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { "content-type": "application/json", prefer: "respond-async" })
      },
      ...(json === undefined ? {} : { body: JSON.stringify(json) })
    })
    return { status: response.status, body: parseObject(await response.text()) }
  })

/** What `read` answers once `condition` holds of it. A poll: the hub is another process, whose signals do not reach this one. */
const polled = <A, E, R>(what: string, read: Effect.Effect<A, E, R>, condition: (a: A) => boolean) =>
  Effect.suspend(() => {
    let last: A | undefined
    return read.pipe(
      Effect.tap((a) => Effect.sync(() => void (last = a))),
      Effect.filterOrFail(condition, () => `not yet: ${what}`),
      Effect.retry(Schedule.spaced(Duration.millis(10))),
      Effect.timeoutFail({
        duration: Duration.seconds(20),
        onTimeout: () => `${what} did not happen in time; last read: ${JSON.stringify(last)}`
      }),
      Effect.orDie
    )
  })

interface QueueRow {
  readonly message_id: string
  readonly state: string
}

describe.each(engines)("a hub process killed with SIGKILL mid-drain (%s)", (engine) => {
  it.live(
    "loses no queued send and makes none twice: sends in the Graph call end outcome_unknown, leased and queued ones are sent after the restart",
    () =>
      Effect.gen(function*() {
        const { env: base, fake, local, sql } = yield* forHubProcesses(engine)
        // Two numbers: the Graph never answers the first two calls of one (they are in the call when the
        // hub is killed); the other's sends go one after the other in the pacing.
        const [held, paced] = yield* Effect.provide(Effect.all([seedTenant(), seedTenant()]), local)
        if (held === undefined || paced === undefined) return yield* Effect.dieMessage("two tenants")
        yield* fake.respond({ method: "POST", path: `/${held.phoneNumberId}/messages` }, { hang: true }, 2)
        const env = { ...base, HUB_SEND_RATE: String(RATE) }
        const first = yield* startHubProcess(env).pipe(Effect.orDie)

        const heldTexts = Array.from({ length: 6 }, (_, i) => `held ${i}`)
        const pacedTexts = Array.from({ length: 16 }, (_, i) => `paced ${i}`)
        const queue = (tenant: Tenant, texts: ReadonlyArray<string>, from: number) =>
          Effect.forEach(texts, (text, i) =>
            Effect.map(
              call(first, "POST", "/api/messages", tenant.instanceToken, {
                to: recipient(from + i),
                type: "text",
                text: { body: text }
              }),
              (answer) => {
                expect(answer.status).toBe(202)
                expect(answer.body).toMatchObject({ status: "pending" })
                return [String(answer.body.id), text] as const
              }
            ))
        const textOf = new Map([...yield* queue(held, heldTexts, 0), ...yield* queue(paced, pacedTexts, 100)])
        const idOf = new Map([...textOf].map(([id, text]) => [text, id]))

        // The two held calls are in the Graph and the paced number is past its burst: each of its sends
        // now waits in the pacing, leased, for 200 ms. The hub is killed while one does.
        yield* untilSignalledThat(
          fake.received,
          "the held calls in the Graph, the paced number past its burst",
          fake.requests,
          (requests) => {
            const texts = sentTexts(requests)
            return texts.filter((text) => text.startsWith("held")).length === 2 &&
              texts.filter((text) => text.startsWith("paced")).length >= RATE + 2
          }
        )
        yield* polled(
          "a send leased, waiting in the pacing",
          sql<QueueRow>`SELECT message_id, state FROM send_queue`,
          (rows) => rows.some((row) => row.state === "leased")
        )
        first.kill("SIGKILL")
        expect(yield* Effect.promise(() => first.exited)).toBe(137)

        // What the dead hub left, as it left it.
        const callsAtKill = callsByText(yield* fake.requests)
        const left = yield* sql<QueueRow>`SELECT message_id, state FROM send_queue`
        const inState = (state: string) =>
          left.filter((row) => row.state === state).map((row) => textOf.get(row.message_id) ?? row.message_id)
        const sending = inState("sending")
        const leased = inState("leased")
        const queued = inState("queued")
        // The held calls are `sending`, with their one call made; the held number's other sends wait in the queue.
        expect(sending).toEqual(expect.arrayContaining(["held 0", "held 1"]))
        expect(sending.every((text) => callsAtKill.get(text) === 1)).toBe(true)
        expect(leased.filter((text) => text.startsWith("paced")).length).toBeGreaterThan(0)
        expect(queued).toEqual(expect.arrayContaining(["held 2", "held 3", "held 4", "held 5"]))
        // Nothing leased or queued had reached the Graph.
        expect([...leased, ...queued].filter((text) => callsAtKill.has(text))).toEqual([])

        // LEASE_MS (60 s) is a constant: the dead hub's leases are moved back by it, as if that long had
        // passed, instead of waiting it out.
        yield* sql`UPDATE send_queue SET lease_until = lease_until - ${LEASE_MS} WHERE lease_until IS NOT NULL`

        // SQLite: the hub restarted on its file. PostgreSQL: two other replicas take over.
        const after = yield* Effect.all(
          Array.from({ length: engine === "postgres" ? 2 : 1 }, () => startHubProcess(env).pipe(Effect.orDie)),
          { concurrency: "unbounded" }
        )
        const survivor = after[0]
        if (survivor === undefined) return yield* Effect.dieMessage("a hub after the kill")
        yield* polled(
          "every queued send ended and told, the queue empty",
          sql<{ readonly waiting: number; readonly open: number; readonly told: number }>`SELECT
            (SELECT CAST(COUNT(*) AS INTEGER) FROM send_queue) AS waiting,
            (SELECT CAST(COUNT(*) AS INTEGER) FROM messages WHERE wa_message_id IS NULL AND status <> 'failed') AS open,
            (SELECT CAST(COUNT(*) AS INTEGER) FROM events WHERE body LIKE ${QUEUE_EVENT_BODY}) AS told`,
          (rows) => rows[0]?.waiting === 0 && rows[0]?.open === 0 && (rows[0]?.told ?? 0) >= textOf.size
        )

        const calls = callsByText(yield* fake.requests)
        const records = new Map<string, Readonly<Record<string, unknown>>>()
        for (const tenant of [held, paced]) {
          const page = yield* call(survivor, "GET", "/api/messages?limit=100", tenant.instanceToken)
          expect(page.status).toBe(200)
          for (const record of itemsOf(page.body)) records.set(String(record.id), record)
        }
        expect(records.size).toBe(textOf.size)
        // No text reached the Graph twice; each reached it once, but for none.
        expect([...calls.entries()].filter(([, n]) => n > 1)).toEqual([])
        expect([...textOf.values()].filter((text) => calls.get(text) !== 1)).toEqual([])
        // The calls the Graph never answered end failed as outcome_unknown: never made again.
        const unknown = { status: "failed", failureReason: "outcome_unknown", waMessageId: null }
        for (const text of ["held 0", "held 1"]) expect(records.get(idOf.get(text) ?? ""), text).toMatchObject(unknown)
        // A send the Graph answered just before the kill may have had its record accepted, and not its
        // queue row taken out: accepted it stays; otherwise it too is outcome_unknown. Never sent again.
        for (const text of sending) {
          const record = records.get(idOf.get(text) ?? "")
          if (record?.status === "failed") expect(record, text).toMatchObject(unknown)
          else expect(record, text).toMatchObject({ status: "pending", waMessageId: expect.stringMatching(/^wamid\./) })
        }
        // Every other send was made, once: those leased or queued at the kill by the hub(s) after it.
        for (const [id, text] of textOf) {
          if (sending.includes(text)) continue
          expect(records.get(id), text).toMatchObject({
            status: "pending",
            waMessageId: expect.stringMatching(/^wamid\./)
          })
          expect(records.get(id)?.failureReason, text).toBeUndefined()
        }
        const madeAfter = [...textOf.values()].filter((text) => !callsAtKill.has(text))
        expect(new Set(madeAfter)).toEqual(new Set([...leased, ...queued]))
        // Each outcome is told once (hub.message_queue): the unanswered calls as outcome_unknown, the
        // sends made as sent with their record's wamid. (What a send the Graph answered just before the
        // kill is told as: the test below.)
        const told = (yield* sql<{ readonly body: string }>`SELECT body FROM events`).flatMap((event) =>
          queueOutcomes(event.body)
        )
        expect(told.map((outcome) => textOf.get(outcome.message_id)).sort()).toEqual([...textOf.values()].sort())
        for (const outcome of told) {
          const text = textOf.get(outcome.message_id) ?? ""
          const record = records.get(outcome.message_id)
          if (text === "held 0" || text === "held 1") {
            expect(outcome, text).toEqual({
              message_id: outcome.message_id,
              status: "failed",
              failure_reason: "outcome_unknown"
            })
          } else if (!sending.includes(text)) {
            expect(outcome, text).toEqual({
              message_id: outcome.message_id,
              status: "sent",
              wa_message_id: record?.waMessageId
            })
          }
        }
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})

/**
 * A hub on PostgreSQL (its clock one the test moves) with one queued send leased and waiting in the
 * pacing: the number's shared budget is spent for the next hour, as a fleet's synchronous sends at the
 * number's rate would keep it. `release` gives the budget back.
 */
const sendWaitingInThePacing = (text: string) =>
  Effect.gen(function*() {
    const hub = yield* Layer.build(Layer.provideMerge(
      testHubOnFakeGraph({ engine: "postgres", sendRateCap: 8 }),
      shiftedClockLayer
    ))
    const sql = Context.get(hub, SqlClient.SqlClient)
    const tenant = yield* Effect.provide(seedTenant(), hub)
    yield* sql`INSERT INTO send_pacing (phone_number_id, tat_ms, last_grant)
      VALUES (${tenant.phoneNumberId}, EXTRACT(EPOCH FROM clock_timestamp()) * 1000 + 3600000, 0)`
    const queued = yield* Effect.provide(
      Effect.flatMap(TestHub, (http) =>
        http.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          headers: { prefer: "respond-async" },
          json: { to: recipient(0), type: "text", text: { body: text } }
        })),
      hub
    )
    expect(queued.status).toBe(202)
    const id = String(queued.body.id)
    const leaseOf = sql<{ readonly state: string; readonly lease_until: number | null }>`SELECT state,
      CAST(lease_until AS DOUBLE PRECISION) AS lease_until FROM send_queue WHERE message_id = ${id}`
    // A poll: the drainer signals the sends it ends, not its leases.
    const [leased] = yield* polled("the send leased", leaseOf, (rows) => rows[0]?.state === "leased")
    const drainer = Context.get(hub, SendQueueDrainer)
    return {
      hub,
      sql,
      tenant,
      id,
      leaseOf,
      leaseUntil: leased?.lease_until ?? 0,
      drainer,
      fake: Context.get(hub, FakeGraph),
      release: sql`DELETE FROM send_pacing WHERE phone_number_id = ${tenant.phoneNumberId}`,
      /** Once nothing of the queue is in flight on the hub and `condition` holds of the queue's depth. */
      untilIdle: (what: string, condition: (depth: number) => boolean) =>
        untilSignalledThat(
          drainer.settled,
          what,
          sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM send_queue`,
          (rows) => condition(rows[0]?.n ?? -1) && drainer.inFlight() === 0
        )
    }
  })

describe("a queued send leased and waiting in the pacing (PostgreSQL)", () => {
  it.live(
    "is made once though it waits longer than its lease: the lease running out must not let the queue hand it out again",
    () =>
      Effect.gen(function*() {
        const text = "waits past its lease"
        const waiting = yield* sendWaitingInThePacing(text)
        // Its lease runs out while it waits (LEASE_MS, 60 s, on the hub's clock)...
        yield* Effect.provide(Effect.flatMap(ShiftedClock, (clock) => clock.advance(LEASE_MS + 1_000)), waiting.hub)
        // ... and a round of the drainer (at most a second later) has recovered it, or renewed it.
        yield* polled(
          "a round after the lease ran out",
          waiting.leaseOf,
          (rows) => (rows[0]?.lease_until ?? 0) >= waiting.leaseUntil + LEASE_MS
        )
        yield* waiting.release
        yield* waiting.untilIdle("the send made and nothing of the queue in flight", (depth) => depth === 0)
        const [record] = yield* waiting.sql<{ readonly wa_message_id: string | null }>`SELECT wa_message_id
        FROM messages WHERE id = ${waiting.id}`
        expect(record?.wa_message_id).toMatch(/^wamid\./)
        expect(callsByText(yield* waiting.fake.requests).get(text)).toBe(1)
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live("cancelled while it waits (200, failed as cancelled), it is never sent", () =>
    Effect.gen(function*() {
      const text = "cancelled while leased"
      const waiting = yield* sendWaitingInThePacing(text)
      const cancelled = yield* Effect.provide(
        Effect.flatMap(TestHub, (http) =>
          http.request("DELETE", `/api/messages/${waiting.id}`, { token: waiting.tenant.instanceToken })),
        waiting.hub
      )
      expect(cancelled.status).toBe(200)
      expect(cancelled.body).toMatchObject({ id: waiting.id, status: "failed", failureReason: "cancelled" })
      yield* waiting.release
      // The leased send's turn comes; then nothing of the queue is in flight.
      yield* waiting.untilIdle("the cancelled send's turn past", (depth) =>
        depth === 0)
      const [record] = yield* waiting.sql<
        { readonly status: string; readonly failure_reason: string | null; readonly wa_message_id: string | null }
      >`SELECT status, failure_reason, wa_message_id FROM messages WHERE id = ${waiting.id}`
      expect(record).toEqual({ status: "failed", failure_reason: "cancelled", wa_message_id: null })
      expect(callsByText(yield* waiting.fake.requests).get(text)).toBeUndefined()
    }).pipe(Effect.scoped), { timeout: 30_000 })
})

describe("replicas recovering a lost lease at the same moment (PostgreSQL)", () => {
  it.live("the send whose call began is taken out, and answered as lost, by one of them only", () =>
    Effect.gen(function*() {
      const repo = yield* SendQueueRepo
      const sql = yield* SqlClient.SqlClient
      const now = Date.now()
      const messageId = newId("msg")
      yield* repo.insert([{
        messageId,
        organizationId: newId("org"),
        instanceId: newId("ins"),
        wabaId: "410000000000001",
        phoneNumberId: "310000000000001",
        party: recipient(0),
        priority: 0,
        body: JSON.stringify({ to: recipient(0), type: "text", text: { body: "lost" } }),
        endpoint: "messages",
        sendAt: now,
        expiresAt: now + 3_600_000
      }])
      // A replica leased it, began its call and died: its lease ran out.
      const [leased] = yield* repo.leaseLanes([{
        phoneNumberId: "310000000000001",
        limit: 1,
        now,
        owner: "dead replica",
        leaseUntil: now + 1,
        pairBurstMs: 0,
        priority: 0
      }])
      expect(leased?.map((row) => row.message_id)).toEqual([messageId])
      expect(yield* claimSending(repo, messageId, "dead replica", now + 1)).toBe(true)
      // Two replicas' rounds recover it at the same moment. So that both read it before either takes it
      // out, the row is held locked (as a third transaction could) until both wait for it.
      const locked = yield* Deferred.make<void>()
      const unlock = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
        yield* sql`SELECT message_id FROM send_queue WHERE message_id = ${messageId} FOR UPDATE`
        yield* Deferred.succeed(locked, undefined)
        yield* Deferred.await(unlock)
      })))
      yield* Deferred.await(locked)
      const rounds = yield* Effect.fork(
        Effect.all([repo.recoverLeases(now + 10), repo.recoverLeases(now + 10)], { concurrency: 2 })
      )
      // A poll: PostgreSQL says when a statement waits for a lock, nothing tells.
      yield* polled(
        "both rounds waiting for the row",
        sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        (rows) => rows[0]?.n === 2
      )
      yield* Deferred.succeed(unlock, undefined)
      yield* Fiber.join(holder)
      const [first, second] = yield* Fiber.join(rounds)
      // Each send answered as lost is recorded failed and told (hub.message_queue) by the round that got it: once.
      expect([...(first ?? []), ...(second ?? [])].map((row) => row.message_id)).toEqual([messageId])
      expect(yield* sql`SELECT message_id FROM send_queue`).toEqual([])
    }).pipe(Effect.provide(
      SendQueueRepo.Default.pipe(
        Layer.provide(WriteBatcherLive.pipe(Layer.provide(Metrics.Off))),
        Layer.provideMerge(testDatabase("postgres"))
      )
    )))
})

describe.each(engines)("a hub process stopped with SIGTERM mid-drain (%s)", (engine) => {
  it.live(
    "gives back the sends waiting for their turn and finishes those in the Graph call: each is made once or queued again, none left leased",
    () =>
      Effect.gen(function*() {
        const { env, fake, local, sql } = yield* forHubProcesses(engine)
        const tenant = yield* Effect.provide(seedTenant(), local)
        // The Graph answers the first call only when the test says (it is in the Graph at the SIGTERM); the
        // others at once, while the pacing (RATE a second) keeps the rest leased, waiting for their turn.
        const answer = yield* heldAcceptance(fake, tenant.phoneNumberId, "wamid.STOPPED")
        const hub = yield* startHubProcess({ ...env, HUB_SEND_RATE: String(RATE) }).pipe(Effect.orDie)
        const texts = Array.from({ length: 12 }, (_, i) => `stopped ${i}`)
        const textOf = new Map(
          yield* Effect.forEach(texts, (text, i) =>
            Effect.map(
              call(hub, "POST", "/api/messages", tenant.instanceToken, {
                to: recipient(i),
                type: "text",
                text: { body: text }
              }),
              (queued) => [String(queued.body.id), text] as const
            ))
        )
        yield* untilSignalledThat(fake.received, "calls in the Graph", fake.requests, (r) => sentTexts(r).length > 0)
        yield* polled(
          "a send leased, waiting for its turn",
          sql<QueueRow>`SELECT message_id, state FROM send_queue`,
          (rows) => rows.some((row) => row.state === "leased")
        )
        hub.kill("SIGTERM")
        // The hub waits for its calls in the Graph: answered, they finish and it exits cleanly.
        yield* Deferred.succeed(answer, undefined)
        expect(yield* Effect.promise(() => hub.exited)).toBe(0)

        const calls = callsByText(yield* fake.requests)
        const left = yield* sql<QueueRow & { readonly lease_owner: string | null }>`SELECT message_id, state,
          lease_owner FROM send_queue`
        const records = yield* sql<{ readonly id: string; readonly wa_message_id: string | null }>`SELECT id,
          wa_message_id FROM messages`
        // None left leased or sending: what waited was given back, what was in the call finished.
        expect(left.every((row) => row.state === "queued" && row.lease_owner === null)).toBe(true)
        const queuedAgain = new Set(left.map((row) => textOf.get(row.message_id)))
        expect(queuedAgain.size).toBeGreaterThan(0)
        for (const record of records) {
          const text = textOf.get(record.id) ?? record.id
          if (queuedAgain.has(text)) {
            expect(calls.get(text), text).toBeUndefined()
            expect(record.wa_message_id, text).toBeNull()
          } else {
            expect(calls.get(text), text).toBe(1)
            expect(record.wa_message_id, text).toMatch(/^wamid\./)
          }
        }
        expect(records).toHaveLength(texts.length)
        // The call held in the Graph at the SIGTERM was finished, not abandoned.
        expect(records.filter((record) => record.wa_message_id === "wamid.STOPPED")).toHaveLength(1)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})

describe("a hub process killed just after the Graph accepted a queued send (PostgreSQL)", () => {
  it.live(
    "the acceptance and the send's leaving the queue commit together: killed before that commit, the send is made once and ends outcome_unknown, never half-recorded",
    () =>
      Effect.gen(function*() {
        const { env, fake, local, sql } = yield* forHubProcesses("postgres")
        const tenant = yield* Effect.provide(seedTenant(), local)
        const text = "accepted at the kill"
        const wamid = "wamid.HBgLMTY1MDU1NTAwMDAVAgARGBJBQ0NFUFRFRF9BVF9LSUxMAA=="
        const answer = yield* heldAcceptance(fake, tenant.phoneNumberId, wamid)
        const first = yield* startHubProcess(env).pipe(Effect.orDie)
        const queued = yield* call(first, "POST", "/api/messages", tenant.instanceToken, {
          to: recipient(0),
          type: "text",
          text: { body: text }
        })
        expect(queued.status).toBe(202)
        const id = String(queued.body.id)
        yield* untilSignalledThat(
          fake.received,
          "the send's call in the Graph",
          fake.requests,
          (requests) => sentTexts(requests).includes(text)
        )
        // The queue row is held locked (as another transaction could hold it) when the Graph answers: the
        // hub's commit of the outcome (acceptance, row taken out, event) waits for it, and is killed then.
        const locked = yield* Deferred.make<ReadonlyArray<{ readonly state: string }>>()
        const unlock = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<{ readonly state: string }>`SELECT state FROM send_queue
          WHERE message_id = ${id} FOR UPDATE`
          yield* Deferred.succeed(locked, rows)
          yield* Deferred.await(unlock)
        })))
        expect(yield* Deferred.await(locked)).toEqual([{ state: "sending" }])
        yield* Deferred.succeed(answer, undefined)
        yield* polled(
          "the acceptance recorded and the queue's write waiting for the row",
          Effect.all({
            record: sql<{ readonly wa_message_id: string | null }>`SELECT wa_message_id FROM messages WHERE id = ${id}`,
            waiting: sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`
          }),
          ({ record, waiting }) => record[0] !== undefined && (waiting[0]?.n ?? 0) > 0
        )
        // Written in the waiting transaction, not committed: nobody else sees the acceptance yet.
        expect(yield* sql`SELECT wa_message_id FROM messages WHERE id = ${id}`).toEqual([{ wa_message_id: null }])
        first.kill("SIGKILL")
        expect(yield* Effect.promise(() => first.exited)).toBe(137)
        yield* Deferred.succeed(unlock, undefined)
        yield* Fiber.join(holder)
        expect(yield* sql`SELECT state FROM send_queue WHERE message_id = ${id}`).toEqual([{ state: "sending" }])

        // LEASE_MS passes (moved back rather than waited out, as above); another replica takes over.
        yield* sql`UPDATE send_queue SET lease_until = lease_until - ${LEASE_MS} WHERE lease_until IS NOT NULL`
        const second = yield* startHubProcess(env).pipe(Effect.orDie)
        yield* polled(
          "the dead hub's send taken out of the queue and told",
          sql<{ readonly waiting: number; readonly told: number }>`SELECT
            (SELECT CAST(COUNT(*) AS INTEGER) FROM send_queue) AS waiting,
            (SELECT CAST(COUNT(*) AS INTEGER) FROM events WHERE body LIKE ${QUEUE_EVENT_BODY}) AS told`,
          (rows) => rows[0]?.waiting === 0 && (rows[0]?.told ?? 0) > 0
        )
        const listed = yield* call(second, "GET", "/api/messages", tenant.instanceToken)
        const [record] = itemsOf(listed.body)
        // Nothing of the lost commit survived: the call may have reached Meta, so the send is not made again.
        expect(record).toMatchObject({ id, status: "failed", failureReason: "outcome_unknown" })
        expect(record?.waMessageId).toBeNull()
        expect(callsByText(yield* fake.requests).get(text)).toBe(1)
        const told = (yield* sql<{ readonly body: string }>`SELECT body FROM events`).flatMap((event) =>
          queueOutcomes(event.body)
        )
        expect(told).toEqual([{ message_id: id, status: "failed", failure_reason: "outcome_unknown" }])
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})

describe.each(engines)("a number's queue as read and claimed (%s)", (engine) => {
  it.live("depth counts every send it holds; the oldest wait is of the sends whose time came and that still wait; a send claimed twice at once is claimed once", () =>
    Effect.gen(function*() {
      const repo = yield* SendQueueRepo
      const now = Date.now()
      const send = (phoneNumberId: string, person: number, priority: number, sendAt: number) => ({
        messageId: newId("msg"),
        organizationId: newId("org"),
        instanceId: newId("ins"),
        wabaId: "410000000000001",
        phoneNumberId,
        party: recipient(person),
        priority,
        body: JSON.stringify({ to: recipient(person), type: "text", text: { body: "read" } }),
        endpoint: "messages",
        sendAt,
        expiresAt: now + 3_600_000
      })
      const [a, b, c] = ["310000000000001", "310000000000002", "310000000000003"]
      yield* repo.insert([
        // A: a bulk send due 5 s ago, a transactional one due 2 s ago, one an hour ahead.
        send(a!, 0, 1, now - 5_000),
        send(a!, 1, 0, now - 2_000),
        send(a!, 2, 1, now + 3_600_000),
        // B: one send due 9 s ago, then leased (being made: it no longer waits).
        send(b!, 3, 1, now - 9_000),
        // C: only a send an hour ahead.
        send(c!, 4, 0, now + 3_600_000)
      ])
      const [leased] = yield* repo.leaseLanes([{
        phoneNumberId: b!,
        priority: 1,
        limit: 10,
        now,
        owner: "a replica",
        leaseUntil: now + 60_000,
        pairBurstMs: 0
      }])
      expect(leased?.length).toBe(1)
      const byNumber = (readings: ReadonlyArray<{ readonly phoneNumberId: string }>) =>
        Object.fromEntries(readings.map((reading) => [reading.phoneNumberId, reading]))
      expect(byNumber(yield* repo.readings(now))).toEqual({
        [a!]: { phoneNumberId: a, depth: 3, oldestWaitSeconds: 5, sendsPerSecond: 0 },
        [b!]: { phoneNumberId: b, depth: 1, oldestWaitSeconds: 0, sendsPerSecond: 0 },
        [c!]: { phoneNumberId: c, depth: 1, oldestWaitSeconds: 0, sendsPerSecond: 0 }
      })
      // A caller's own numbers only.
      expect(byNumber(yield* repo.readings(now, [c!, "310000000000009"]))).toEqual({
        [c!]: { phoneNumberId: c, depth: 1, oldestWaitSeconds: 0, sendsPerSecond: 0 }
      })
      // The lanes with sends due: A's two, none of B's (leased) or C's (not yet).
      expect(yield* repo.dueLanes(now)).toEqual([{ phoneNumberId: a, priorities: [0, 1] }])
      // B's send claimed twice at once (leased again by its replica after its lease ran out, while the first
      // lease's turn came): the claims share one group commit, and only one of them may make the send.
      const claims = yield* Effect.all([
        claimSending(repo, leased![0]!.message_id, "a replica", now + 60_000),
        claimSending(repo, leased![0]!.message_id, "a replica", now + 60_000),
        claimSending(repo, leased![0]!.message_id, "another replica", now + 60_000)
      ], { concurrency: "unbounded" })
      expect(claims).toEqual([true, false, false])
    }).pipe(Effect.provide(
      SendQueueRepo.Default.pipe(
        Layer.provide(WriteBatcherLive.pipe(Layer.provide(Metrics.Off))),
        Layer.provideMerge(testDatabase(engine))
      )
    )))
})

/**
 * Surviving the database (issue 34, point 3). Two hub processes on a PostgreSQL server of their own,
 * under a stream of upstream posts, sends and queued sends: every backend connection terminated, then
 * the server stopped and started again. Every request is answered 200, 202, or 503 with Retry-After
 * (never 500, never a hang); /ready says 503 while the server is gone and 200 once it is back, without
 * a restart of the hubs; every post answered 200 reaches the webhook (each change in one delivery,
 * sent again only when an attempt was in flight), every send answered 200 or 202 is recorded and the
 * queued ones are made, and no delivery or queued send is left leased.
 */
import { expect, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import pg from "pg"
import { demoTokensText } from "./support/DemoTokens.js"
import { type HubProcess, startHubProcess } from "./support/HubProcess.js"
import { type Answer, brokenAnswers, startLoad } from "./support/Outage.js"
import { startPostgres } from "./support/PostgresServer.js"
import { makeReceiver, type ReceivedRequest } from "./support/Receivers.js"

/** The demo instance the sandbox creates (Cli/Bootstrap.ts). */
const DEMO = { phoneNumberId: "100000000000001", wabaId: "200000000000001" }

const query = async <R extends pg.QueryResultRow>(url: string, text: string, values: ReadonlyArray<unknown> = []) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query<R>(text, [...values])).rows
  } finally {
    await client.end()
  }
}

const call = (hub: HubProcess, method: string, path: string, options: { token?: string; json?: unknown } = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${hub.baseUrl}${path}`, {
      method,
      headers: {
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        ...(options.json === undefined ? {} : { "content-type": "application/json" })
      },
      ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) })
    }).catch(() => undefined)
    if (response === undefined) return { status: 0, text: "" }
    return { status: response.status, text: await response.text() }
  })

/** Polls /ready of each hub until it answers `status` (another process: no signal of its own reaches this one). */
const readyIs = (hubs: ReadonlyArray<HubProcess>, status: number) =>
  Effect.forEach(hubs, (hub) =>
    call(hub, "GET", "/ready").pipe(
      Effect.filterOrFail((answer) => answer.status === status, () => "not yet"),
      Effect.retry(Schedule.spaced(Duration.millis(50))),
      Effect.timeoutFail({
        duration: Duration.seconds(20),
        onTimeout: () => new Error(`/ready did not answer ${status} in time`)
      }),
      Effect.orDie
    ))

/** The status ids (one per post) a delivery carried. */
const changeIds = (request: ReceivedRequest): ReadonlyArray<string> => {
  const ids: Array<string> = []
  const walk = (value: unknown, key: string | undefined) => {
    if (Array.isArray(value)) { for (const item of value) walk(item, key) }
    else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (key === "statuses" && k === "id" && typeof v === "string") ids.push(v)
        walk(v, k === "id" ? key : k)
      }
    }
  }
  walk(JSON.parse(request.body), undefined)
  return ids
}

const accepted = (answers: ReadonlyArray<Answer>, kind: Answer["kind"]) =>
  answers.filter((a) => a.kind === kind && (a.status === 200 || a.status === 202)).map((a) => a.id)

it.live(
  "PostgreSQL's connections terminated, then the server restarted, under load: 503 with Retry-After while it is gone, nothing accepted lost, the hubs resume by themselves",
  () =>
    Effect.gen(function*() {
      const server = yield* Effect.acquireRelease(
        Effect.promise(() => startPostgres({ maxConnections: 40 })),
        (started) => Effect.promise(() => started.stop())
      )
      yield* Effect.promise(() => query(server.urlOf("postgres"), "CREATE DATABASE hub"))
      const url = server.urlOf("hub")
      const env = {
        HUB_DB: url,
        HUB_DB_POOL_SIZE: "4",
        HUB_SECRET_KEY: "cd".repeat(32),
        HUB_SANDBOX_STATUS_DELAY: "1h",
        HUB_WEBHOOK_TIMEOUT_MS: "2000",
        HUB_DISPATCH_LEASE_MARGIN: "500ms",
        HUB_WEBHOOK_RETRY: "100ms,200ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s"
      }
      const first = yield* startHubProcess(env)
      const second = yield* startHubProcess(env)
      const hubs = [first, second]
      const token = /instance token\s+(\S+)/.exec(demoTokensText(first.output()))?.[1] ?? ""
      const receiver = yield* makeReceiver(() => ({ status: 200, delayMs: 20 }))
      const created = yield* call(first, "POST", "/api/webhooks", {
        token,
        json: { url: receiver.url, name: "outage", events: ["statuses"] }
      })
      expect(created.status).toBe(201)

      const load = startLoad(hubs.map((hub) => ({ baseUrl: hub.baseUrl, token, number: DEMO })))
      const ok = (a: Answer) => a.status === 200 || a.status === 202
      const more = (what: string, count: number, check: (a: Answer) => boolean) =>
        Effect.promise(() => load.moreAnswers(count, check)).pipe(
          Effect.timeoutFail({
            duration: Duration.seconds(30),
            onTimeout: () =>
              new Error(
                `${what}: not in time; the last answers: ${
                  JSON.stringify(load.answers.slice(-5).map((a) => [a.kind, a.status, a.text.slice(0, 200)]))
                }\n${first.output().slice(-3000)}`
              )
          }),
          Effect.orDie
        )
      yield* more("answers before", 40, ok)

      // (a) Every backend connection terminated (the hubs' pools and listeners): they connect again.
      yield* Effect.promise(() =>
        query(
          url,
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
      )
      yield* more("answers after the connections were terminated", 40, ok)

      // (b) The server stopped: /ready says 503, requests are refused with 503 and Retry-After.
      yield* Effect.promise(() => server.halt())
      yield* readyIs(hubs, 503)
      yield* more("refusals while the server is down", 20, (a) => a.status === 503)
      yield* Effect.promise(() => server.resume())
      yield* readyIs(hubs, 200)
      yield* more("answers after the restart", 40, ok)
      const answers = yield* Effect.promise(() => load.stop())

      expect(brokenAnswers(answers).map((a) => `${a.kind} ${a.status} ${Math.round(a.ms)}ms ${a.text.slice(0, 200)}`))
        .toEqual([])
      const refused = answers.filter((a) => a.status === 503)
      expect(refused.length).toBeGreaterThan(0)
      for (const answer of refused) {
        expect(JSON.parse(answer.text)).toMatchObject({ statusCode: 503 })
      }

      // Every post answered 200 reaches the webhook, each in one delivery.
      const posts = accepted(answers, "post")
      yield* receiver.waitFor("every change answered 200", (requests) => {
        const got = new Set(requests.flatMap(changeIds))
        return posts.every((id) => got.has(id))
      }, Duration.seconds(60))
      const deliveriesOf = new Map<string, Set<string>>()
      for (const request of receiver.requests) {
        for (const id of changeIds(request)) {
          const ids = deliveriesOf.get(id) ?? new Set()
          ids.add(request.headers["webhook-id"] ?? "")
          deliveriesOf.set(id, ids)
        }
      }
      expect([...deliveriesOf.entries()].filter(([, ids]) => ids.size > 1)).toEqual([])

      // Every send answered 200 or 202 is recorded; the queued ones are made; nothing is left leased.
      const sent = accepted(answers, "send")
      const queued = accepted(answers, "queued")
      const settled = Effect.promise(() =>
        query<{ readonly queue: string; readonly leased: string; readonly unsent: string; readonly sent: string }>(
          url,
          `SELECT (SELECT COUNT(*) FROM send_queue) AS queue,
             (SELECT COUNT(*) FROM deliveries WHERE status <> 'succeeded' OR lease_owner IS NOT NULL) AS leased,
             (SELECT COUNT(*) FROM messages WHERE id = ANY($1) AND wa_message_id IS NULL) AS unsent,
             (SELECT COUNT(*) FROM messages WHERE wa_message_id = ANY($2)) AS sent`,
          [queued, sent]
        )
      ).pipe(
        Effect.map((rows) => rows[0]),
        Effect.filterOrFail(
          (row) => row?.queue === "0" && row.leased === "0" && row.unsent === "0" && Number(row.sent) === sent.length,
          () => "not yet"
        ),
        Effect.retry(Schedule.spaced(Duration.millis(100))),
        Effect.timeoutFail({
          duration: Duration.seconds(60),
          onTimeout: () => new Error("queued sends or deliveries were left unsent or leased")
        }),
        Effect.orDie
      )
      yield* settled
      expect(sent.length).toBeGreaterThan(0)
      expect(queued.length).toBeGreaterThan(0)
    }).pipe(Effect.scoped),
  { timeout: 180_000 }
)

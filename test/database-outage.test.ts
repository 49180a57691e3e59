/**
 * Surviving the database (issue 34, point 3). Two hub processes on a PostgreSQL server of their own,
 * under a stream of upstream posts, sends and queued sends: every backend connection terminated, then
 * the server stopped and started again. Every request is answered 200, 202, or 503 with Retry-After
 * (never 500, never a hang); /ready says 503 while the server is gone and 200 once it is back, without
 * a restart of the hubs; every post answered 200 reaches the webhook (each change in one delivery,
 * sent again only when an attempt was in flight), every send answered 200 or 202 is recorded and the
 * queued ones are made, and no delivery or queued send is left leased. Then a SQLite database that
 * cannot be written (a page limit on the hub's connection: SQLITE_FULL, as a full disk gives): the
 * same promises, /ready 503 while writes fail, and writing resumes once the limit is raised.
 */
import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { afterAll, expect, it, layer } from "@effect/vitest"
import { Cause, Duration, Effect, Option, Schedule } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { unavailableOf } from "../src/Sql/Unavailable.js"
import { demoTokensText } from "./support/DemoTokens.js"
import { type HubProcess, startHubProcess } from "./support/HubProcess.js"
import {
  accepted,
  type Answer,
  expectEveryPostDelivered,
  expectOnlyPromisedAnswers,
  moreAnswers,
  startLoad
} from "./support/Outage.js"
import { startPostgres } from "./support/PostgresServer.js"
import { makeReceiver } from "./support/Receivers.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"

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
        moreAnswers(load, what, count, check, () => first.output().slice(-3000))
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

      expectOnlyPromisedAnswers(answers)
      yield* expectEveryPostDelivered(receiver, answers)

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

const folder = mkdtempSync(join(tmpdir(), "hub-outage-"))
afterAll(() => rmSync(folder, { recursive: true, force: true }))

layer(testHub({ databaseFile: join(folder, "hub.sqlite"), webhookAllowPrivate: true }), { excludeTestServices: true })(
  "a SQLite database that cannot be written",
  (it) => {
    it.effect(
      "as full as a full disk (max_page_count): 503 with Retry-After, nothing accepted lost, writing resumes once it can",
      () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          // The hub's one connection: a page limit on it fails writes with SQLITE_FULL, exactly as a full disk does.
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* seedTenant()
          const receiver = yield* makeReceiver(() => ({ status: 200, delayMs: 20 }))
          const created = yield* hub.request("POST", "/api/webhooks", {
            token: tenant.instanceToken,
            json: { url: receiver.url, name: "outage", events: ["statuses"] }
          })
          expect(created.status).toBe(201)
          const load = startLoad([{ baseUrl: hub.baseUrl, token: tenant.instanceToken, number: tenant }])
          const ok = (a: Answer) => a.status === 200 || a.status === 202
          yield* moreAnswers(load, "answers before", 40, ok)

          const pages = yield* sql<{ readonly page_count: number }>`PRAGMA page_count`
          yield* sql.unsafe(`PRAGMA max_page_count = ${pages[0]?.page_count ?? 0}`)
          yield* moreAnswers(load, "refusals while the database is full", 20, (a) => a.status === 503)
          const ready = yield* hub.request("GET", "/ready")
          expect(ready.status).toBe(503)
          expect(ready.body).toMatchObject({ statusCode: 503, error: "storage_unavailable" })

          yield* sql.unsafe("PRAGMA max_page_count = 1073741823")
          yield* moreAnswers(load, "answers once it can write", 40, ok)
          const answers = yield* Effect.promise(() => load.stop())
          // Ready again once writes have stopped failing for a while (Health/Http.ts): polled, no signal says when.
          yield* hub.request("GET", "/ready").pipe(
            Effect.filterOrFail((answer) => answer.status === 200, () => "not yet"),
            Effect.retry(Schedule.spaced(Duration.millis(100))),
            Effect.timeoutFail({ duration: Duration.seconds(20), onTimeout: () => new Error("/ready stayed 503") }),
            Effect.orDie
          )

          expectOnlyPromisedAnswers(answers)
          yield* expectEveryPostDelivered(receiver, answers)
          const sent = accepted(answers, "send")
          const queued = accepted(answers, "queued")
          expect(sent.length).toBeGreaterThan(0)
          expect(queued.length).toBeGreaterThan(0)
          yield* sql<
            { readonly queue: number; readonly leased: number; readonly unsent: number; readonly sent: number }
          >`
            SELECT (SELECT COUNT(*) FROM send_queue) AS queue,
              (SELECT COUNT(*) FROM deliveries WHERE status <> 'succeeded' OR lease_owner IS NOT NULL) AS leased,
              (SELECT COUNT(*) FROM messages WHERE ${sql.in("id", queued)} AND wa_message_id IS NULL) AS unsent,
              (SELECT COUNT(*) FROM messages WHERE ${sql.in("wa_message_id", sent)}) AS sent`.pipe(
            Effect.map((rows) => rows[0]),
            Effect.filterOrFail(
              (row) => row?.queue === 0 && row.leased === 0 && row.unsent === 0 && row.sent === sent.length,
              (row) => JSON.stringify(row)
            ),
            Effect.retry(Schedule.spaced(Duration.millis(100))),
            Effect.timeoutFail({
              duration: Duration.seconds(60),
              onTimeout: () => new Error("queued sends or deliveries were left unsent or leased")
            }),
            Effect.orDie
          )
        }).pipe(Effect.scoped),
      { timeout: 120_000 }
    )
  }
)

it("the database unavailable is told apart from a statement at fault: only the first is answered 503", () => {
  const failed = (code: string, message = "failed") =>
    Cause.fail(
      new SqlError({ cause: Object.assign(new Error(message), { code }), message: "Failed to execute statement" })
    )
  for (
    const code of ["SQLITE_FULL", "SQLITE_IOERR_WRITE", "SQLITE_READONLY", "57P01", "08006", "53100", "ECONNREFUSED"]
  ) {
    expect(Option.isSome(unavailableOf(failed(code))), code).toBe(true)
  }
  for (const code of ["SQLITE_CONSTRAINT_UNIQUE", "SQLITE_ERROR", "23505", "42601", "P0001"]) {
    expect(Option.isNone(unavailableOf(failed(code))), code).toBe(true)
  }
  // Died of after orDie, as handlers do: the same.
  expect(Option.isSome(unavailableOf(Cause.die(new SqlError({ cause: { code: "57P01" }, message: "gone" }))))).toBe(
    true
  )
})

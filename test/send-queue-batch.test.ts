/**
 * Queued sends of concurrent requests written together (SendQueue/QueuedSends.ts `enqueueNow`: one group of
 * the WriteBatcher, one statement per table, one commit), on both engines: each send still gets its own
 * record and queue row and its own answer; a send refused before the write, or by the database, fails
 * alone; a commit that fails answers every send of its batch 503 and keeps none of them.
 * The batch tests call the service itself: sends begun in one turn of the event loop join one batch
 * (the WriteBatcher's flush waits for the next turn), which HTTP requests cannot be made to do.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Runtime, Schema } from "effect"
import type { InstanceId, OrganizationId } from "../src/Domain/Ids.js"
import { SendMessageRequest } from "../src/Messages/MessageSchemas.js"
import { QueuedSends } from "../src/SendQueue/QueuedSends.js"
import { testHubOnFakeGraph } from "./support/FakeGraph.js"
import { seedTenant, TestHub } from "./support/TestHub.js"
import { messagesFirstPage } from "./support/TypedRequests.js"

const hourAhead = () => new Date(Date.now() + 3_600_000).toISOString()

const decodeSend = Schema.decodeUnknownSync(SendMessageRequest)

/** A text send queued an hour ahead (the drainer leaves it alone meanwhile), as the API decodes it. */
const later = (to: string, body: string): SendMessageRequest =>
  decodeSend({ to, type: "text", text: { body }, send_at: hourAhead() })

/** A tenant's instance as the queue takes it. */
const instanceOf = (tenant: Effect.Effect.Success<ReturnType<typeof seedTenant>>) => ({
  id: tenant.instanceId as InstanceId,
  organizationId: tenant.organizationId as OrganizationId,
  phoneNumberId: tenant.phoneNumberId,
  wabaId: tenant.wabaId
})

/** Sends begun in one turn of the event loop, as concurrent requests' sends are: one batch. */
const enqueueTogether = (
  tenant: Effect.Effect.Success<ReturnType<typeof seedTenant>>,
  sends: ReadonlyArray<SendMessageRequest>
) =>
  Effect.gen(function*() {
    const queued = yield* QueuedSends
    const inRequest = Runtime.runPromise(yield* Effect.runtime<never>())
    const instance = instanceOf(tenant)
    // The number's depth read first, so that no send of the batch waits for it.
    expect(
      Either.isRight(yield* Effect.promise(() => queued.enqueueNow(instance, later("15550000000", "warm"), inRequest)))
    )
      .toBe(true)
    return yield* Effect.promise(() => Promise.all(sends.map((send) => queued.enqueueNow(instance, send, inRequest))))
  })

/** The tenant's queued rows, by message id. */
const queueRowsOf = (instanceId: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<
        { readonly message_id: string; readonly party: string }
      >`SELECT message_id, party FROM send_queue WHERE instance_id = ${instanceId} ORDER BY seq`
  )

const recordsOf = (token: string) =>
  Effect.gen(function*() {
    const client = yield* (yield* TestHub).client(token)
    return (yield* client.messages.list({ urlParams: messagesFirstPage })).data
  })

/** A database that refuses one person's queue rows: at once, or only at COMMIT (a deferred check). */
const refusing = (engine: "sqlite" | "postgres", party: string, when: "at once" | "at commit") =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    if (engine === "sqlite") {
      if (when === "at once") {
        yield* sql.unsafe(`CREATE TRIGGER refuse_party BEFORE INSERT ON send_queue WHEN NEW.party = '${party}'
          BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
        return sql.unsafe("DROP TRIGGER refuse_party")
      }
      // A deferred foreign key is checked at COMMIT only: a row pointing nowhere fails the whole transaction.
      yield* sql.unsafe(`CREATE TABLE doomed (parent TEXT REFERENCES organizations (id) DEFERRABLE INITIALLY DEFERRED)`)
      yield* sql.unsafe(`CREATE TRIGGER doom_party AFTER INSERT ON send_queue WHEN NEW.party = '${party}'
        BEGIN INSERT INTO doomed VALUES ('org_missing'); END`)
      return Effect.zipRight(sql.unsafe("DROP TRIGGER doom_party"), sql.unsafe("DROP TABLE doomed"))
    }
    yield* sql.unsafe(`CREATE FUNCTION refuse_party() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'disk full'; END $$`)
    yield* sql.unsafe(
      when === "at once"
        ? `CREATE TRIGGER refuse_party BEFORE INSERT ON send_queue FOR EACH ROW WHEN (NEW.party = '${party}')
           EXECUTE FUNCTION refuse_party()`
        : `CREATE CONSTRAINT TRIGGER refuse_party AFTER INSERT ON send_queue DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW WHEN (NEW.party = '${party}') EXECUTE FUNCTION refuse_party()`
    )
    return Effect.zipRight(
      sql.unsafe("DROP TRIGGER refuse_party ON send_queue"),
      sql.unsafe("DROP FUNCTION refuse_party()")
    )
  }).pipe(Effect.orDie)

const storageUnavailable = {
  _tag: "ServiceUnavailable",
  statusCode: 503,
  error: "storage_unavailable"
}

describe.each(["sqlite", "postgres"] as const)("queued sends written together (%s)", (engine) => {
  layer(testHubOnFakeGraph({ engine }), { excludeTestServices: true })("", (it) => {
    it.effect("concurrent requests: each 202 has its own record and queue row; the one with a bad send_at is 400 and queues nothing", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        const sendAt = hourAhead()
        const bodies = Array.from({ length: 12 }, (_, i) => ({
          to: String(15550001000 + i),
          type: "text",
          text: { body: `together ${i}` },
          // The sixth asks for a time long past.
          send_at: i === 5 ? "2020-01-01T00:00:00Z" : sendAt,
          priority: "bulk"
        }))
        const answers = yield* Effect.forEach(
          bodies,
          (json) => hub.request("POST", "/api/messages", { token: tenant.instanceToken, json }),
          { concurrency: "unbounded" }
        )
        expect(answers.map((answer) => answer.status)).toEqual(bodies.map((_, i) => (i === 5 ? 400 : 202)))
        expect(answers[5]?.body).toMatchObject({
          statusCode: 400,
          error: "validation_failed",
          details: [{ field: "send_at" }]
        })
        const accepted = answers.filter((answer) => answer.status === 202)
        for (const answer of accepted) {
          expect(answer.headers.get("preference-applied")).toBe("respond-async")
          expect(answer.body).toEqual({
            id: expect.stringMatching(/^msg_/),
            status: "pending",
            send_at: sendAt,
            expires_at: expect.any(String)
          })
        }
        const ids = accepted.map((answer) => String(answer.body.id))
        expect(new Set(ids).size).toBe(11)
        // Each answer's record is its own send: its id, its person, its lane.
        const records = yield* recordsOf(tenant.instanceToken)
        expect(records).toHaveLength(11)
        const byId = new Map(records.map((record) => [record.id, record]))
        bodies.forEach((body, i) => {
          if (i === 5) return
          expect(byId.get(String(answers[i]?.body.id))).toMatchObject({
            to: body.to,
            status: "pending",
            priority: "bulk"
          })
        })
        const rows = yield* queueRowsOf(tenant.instanceId)
        expect(new Map(rows.map((row) => [row.message_id, row.party]))).toEqual(
          new Map(bodies.flatMap((body, i) => (i === 5 ? [] : [[String(answers[i]?.body.id), body.to]])))
        )
      }))

    it.effect("one batch: a send the database refuses fails alone (503); the others of its batch are queued", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const undo = yield* refusing(engine, "15550002003", "at once")
        const sends = Array.from({ length: 6 }, (_, i) => later(String(15550002000 + i), `batch ${i}`))
        const outcomes = yield* enqueueTogether(tenant, sends).pipe(Effect.ensuring(Effect.orDie(undo)))
        expect(outcomes.map(Either.isRight)).toEqual([true, true, true, false, true, true])
        expect(Either.getLeft(outcomes[3]!).pipe((left) => left._tag === "Some" ? left.value : undefined))
          .toMatchObject(storageUnavailable)
        const queuedIds = outcomes.flatMap((outcome) => (Either.isRight(outcome) ? [outcome.right.id] : []))
        const rows = yield* queueRowsOf(tenant.instanceId)
        expect(rows.map((row) => row.party)).toEqual(
          ["15550000000", ...sends.map((send) => send.to ?? "")].filter((party) => party !== "15550002003")
        )
        expect(rows.slice(1).map((row) => row.message_id)).toEqual(queuedIds)
        // The refused send left no record either: its record and its row are written in one savepoint.
        const records = yield* recordsOf(tenant.instanceToken)
        expect(records.map((record) => record.to).sort()).toEqual(rows.map((row) => row.party).sort())
      }))

    it.effect("a batch whose COMMIT fails: every send of it is answered 503 and none is kept; the next is queued", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const undo = yield* refusing(engine, "15550003002", "at commit")
        const sends = Array.from({ length: 5 }, (_, i) => later(String(15550003000 + i), `doomed ${i}`))
        const outcomes = yield* enqueueTogether(tenant, sends).pipe(Effect.ensuring(Effect.orDie(undo)))
        for (const outcome of outcomes) {
          expect(Either.isLeft(outcome) ? outcome.left : outcome.right).toMatchObject(storageUnavailable)
        }
        // Only the send queued before the batch is there, record and row.
        expect((yield* queueRowsOf(tenant.instanceId)).map((row) => row.party)).toEqual(["15550000000"])
        expect((yield* recordsOf(tenant.instanceToken)).map((record) => record.to)).toEqual(["15550000000"])
        // The connection serves the next batch: the same person's send is queued now.
        const hub = yield* TestHub
        const again = yield* hub.request("POST", "/api/messages", {
          token: tenant.instanceToken,
          json: later("15550003002", "after")
        })
        expect(again.status).toBe(202)
        expect((yield* queueRowsOf(tenant.instanceId)).map((row) => row.party)).toEqual(["15550000000", "15550003002"])
      }))
  })
})

describe.each(["sqlite", "postgres"] as const)("a number's queue bound under concurrent sends (%s)", (engine) => {
  // 0.001 h at 1 send a second: 3 places.
  layer(testHubOnFakeGraph({ engine, sendRateCap: 1, queueMaxHours: 0.001 }), { excludeTestServices: true })(
    "",
    (it) => {
      it.effect("sends of one batch take the places as they are admitted, not once written; a failed write frees its places", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          // The first takes a place (enqueueTogether's warm-up); of five at once only two more fit.
          const undo = yield* refusing(engine, "15550004000", "at commit")
          const doomed = yield* enqueueTogether(tenant, [later("15550004000", "doomed")]).pipe(
            Effect.ensuring(Effect.orDie(undo))
          )
          expect(doomed.map((outcome) => Either.isLeft(outcome) ? outcome.left._tag : "queued")).toEqual([
            "ServiceUnavailable"
          ])
          const queued = yield* QueuedSends
          const inRequest = Runtime.runPromise(yield* Effect.runtime<never>())
          const outcomes = yield* Effect.promise(() =>
            Promise.all(
              Array.from(
                { length: 5 },
                (_, i) => queued.enqueueNow(instanceOf(tenant), later(String(15550004100 + i), `bound ${i}`), inRequest)
              )
            )
          )
          expect(outcomes.map((outcome) => Either.isLeft(outcome) ? outcome.left.error : "queued")).toEqual([
            "queued",
            "queued",
            "queue_full",
            "queue_full",
            "queue_full"
          ])
          expect(outcomes[2]).toMatchObject({ left: { statusCode: 429, retryAfterSeconds: 1 } })
          expect(yield* queueRowsOf(tenant.instanceId)).toHaveLength(3)
        }))
    }
  )
})

/**
 * Every row that names a parent (a delivery its webhook and event, an attempt its delivery, an event
 * and a message their instance, a message its organization) names one that exists, on both engines:
 * SQLite with its built-in foreign keys, PostgreSQL with the per-statement checks of migration 0034
 * on the deliveries' path (Sql/ParentChecks.ts) and its built-in ones for messages. On PostgreSQL
 * also across transactions: an insert locks the parents it names, so a delete waits for it and then
 * fails, and an insert waiting for a delete fails once it commits.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { testDatabase } from "./support/Databases.js"
import { deliveryRow as delivery, seedOutboxParents } from "./support/OutboxParents.js"
import { heldOpen, waitingForLock } from "./support/RowLocks.js"

const now = new Date().toISOString()

const seed = seedOutboxParents(["whk_a", "whk_b", "whk_c"])

const attempt = (id: string, deliveryId: string) => ({
  id,
  delivery_id: deliveryId,
  attempt: 1,
  started_at: now,
  status_code: 200,
  latency_ms: 1
})

const message = (id: string, instanceId: string, organizationId = "org_1") => ({
  id,
  organization_id: organizationId,
  instance_id: instanceId,
  direction: "outbound",
  to_number: "15551234567",
  type: "text",
  status: "pending",
  created_at: now,
  updated_at: now
})

/** The statement's failure, which must be a foreign key's: SQLite's built-in message, or PostgreSQL's SQLSTATE 23503. */
const refused = <A, R>(statement: Effect.Effect<A, SqlError.SqlError, R>) =>
  Effect.map(Effect.flip(statement), (error) => {
    const cause = error.cause
    const code = typeof cause === "object" && cause !== null && "code" in cause ? cause.code : undefined
    return code === "23503" || String(cause).includes("FOREIGN KEY constraint failed") ? "foreign key" : String(cause)
  })

const count = (table: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      Effect.map(sql<{ readonly n: number }>`SELECT COUNT(*) AS n FROM ${sql(table)}`, (rows) => Number(rows[0]?.n))
  )

describe.each(["sqlite", "postgres"] as const)("parents of the hot tables (%s)", (engine) => {
  {
    it.effect("an insert naming a missing parent fails whole; one naming existing parents is written", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* seed
        // One bad row among good ones: none of the statement's rows is written.
        expect(
          yield* refused(
            sql`INSERT INTO deliveries ${
              sql.insert([delivery("d1", "whk_a"), delivery("d2", "whk_missing"), delivery("d3", "whk_b")])
            }`
          )
        ).toBe("foreign key")
        expect(yield* refused(sql`INSERT INTO deliveries ${sql.insert([delivery("d4", "whk_a", "evt_missing")])}`))
          .toBe("foreign key")
        expect(yield* count("deliveries")).toBe(0)
        yield* sql`INSERT INTO deliveries ${sql.insert([delivery("d1", "whk_a"), delivery("d2", "whk_b")])}`
        expect(yield* count("deliveries")).toBe(2)

        expect(yield* refused(sql`INSERT INTO delivery_attempts ${sql.insert([attempt("a1", "d_missing")])}`))
          .toBe("foreign key")
        yield* sql`INSERT INTO delivery_attempts ${sql.insert([attempt("a1", "d1"), attempt("a2", "d1")])}`
        expect(yield* count("delivery_attempts")).toBe(2)

        expect(
          yield* refused(
            sql`INSERT INTO events ${
              sql.insert({ id: "evt_2", instance_id: "ins_missing", body: "{}", change_count: 1, received_at: now })
            }`
          )
        ).toBe("foreign key")
        expect(yield* refused(sql`INSERT INTO messages ${sql.insert([message("m1", "ins_missing")])}`))
          .toBe("foreign key")
        expect(yield* refused(sql`INSERT INTO messages ${sql.insert([message("m2", "ins_1", "org_missing")])}`))
          .toBe("foreign key")
        yield* sql`INSERT INTO messages ${sql.insert([message("m3", "ins_1")])}`
        expect([yield* count("events"), yield* count("messages")]).toEqual([1, 1])
      }).pipe(Effect.provide(testDatabase(engine))))

    it.effect("a parent still named cannot be deleted, nor a reference pointed at a missing parent", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* seed
        yield* sql`INSERT INTO deliveries ${sql.insert([delivery("d1", "whk_a")])}`
        yield* sql`INSERT INTO delivery_attempts ${sql.insert([attempt("a1", "d1")])}`
        yield* sql`INSERT INTO messages ${sql.insert([message("m1", "ins_1")])}`

        expect(yield* refused(sql`DELETE FROM webhooks WHERE id IN ('whk_a', 'whk_c')`)).toBe("foreign key")
        expect(yield* refused(sql`DELETE FROM events WHERE id = 'evt_1'`)).toBe("foreign key")
        expect(yield* refused(sql`DELETE FROM deliveries WHERE id = 'd1'`)).toBe("foreign key")
        // Instances named only by a message, and only by an event.
        for (const id of ["ins_2", "ins_3"]) {
          yield* sql`INSERT INTO instances ${
            sql.insert({ id, organization_id: "org_1", name: id, phone_number_id: id, waba_id: id, created_at: now })
          }`
        }
        yield* sql`INSERT INTO messages ${sql.insert([message("m2", "ins_2")])}`
        yield* sql`INSERT INTO events ${
          sql.insert({ id: "evt_3", instance_id: "ins_3", body: "{}", change_count: 1, received_at: now })
        }`
        expect(yield* refused(sql`DELETE FROM instances WHERE id = 'ins_2'`)).toBe("foreign key")
        expect(yield* refused(sql`DELETE FROM instances WHERE id = 'ins_3'`)).toBe("foreign key")
        expect(yield* refused(sql`UPDATE deliveries SET webhook_id = 'whk_missing' WHERE id = 'd1'`))
          .toBe("foreign key")
        expect(yield* refused(sql`UPDATE delivery_attempts SET delivery_id = 'd_missing' WHERE id = 'a1'`))
          .toBe("foreign key")
        expect(yield* refused(sql`UPDATE webhooks SET id = 'whk_renamed' WHERE id = 'whk_a'`)).toBe("foreign key")
        // Nothing of the refused statements was done: whk_c, named by nothing, is still there too.
        expect([yield* count("webhooks"), yield* count("deliveries"), yield* count("delivery_attempts")])
          .toEqual([3, 1, 1])

        // Children first, then the parent: allowed, as retention does it.
        yield* sql`DELETE FROM delivery_attempts WHERE delivery_id = 'd1'`
        yield* sql`DELETE FROM deliveries WHERE id = 'd1'`
        yield* sql`DELETE FROM webhooks WHERE id = 'whk_a'`
        yield* sql`DELETE FROM events WHERE id IN ('evt_1', 'evt_3')`
        yield* sql`DELETE FROM instances WHERE id = 'ins_3'`
        expect([yield* count("webhooks"), yield* count("events"), yield* count("instances")]).toEqual([2, 0, 2])
      }).pipe(Effect.provide(testDatabase(engine))))

    if (engine === "postgres") {
      it.live("a delete of a parent waits for an insert naming it, then fails once the insert commits", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* seed
          const insert = yield* heldOpen(sql`INSERT INTO deliveries ${sql.insert([delivery("d1", "whk_c")])}`)
          const remove = yield* refused(sql`DELETE FROM webhooks WHERE id = 'whk_c'`).pipe(Effect.fork)
          yield* waitingForLock("DELETE FROM webhooks")
          yield* insert.commit
          expect(yield* Fiber.join(remove)).toBe("foreign key")
          expect([yield* count("webhooks"), yield* count("deliveries")]).toEqual([3, 1])
        }).pipe(Effect.provide(testDatabase(engine))))

      it.live("an insert naming a parent being deleted waits for the delete, then fails once it commits", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* seed
          const remove = yield* heldOpen(sql`DELETE FROM webhooks WHERE id = 'whk_c'`)
          const insert = yield* refused(sql`INSERT INTO deliveries ${sql.insert([delivery("d1", "whk_c")])}`).pipe(
            Effect.fork
          )
          yield* waitingForLock("INSERT INTO deliveries")
          yield* remove.commit
          expect(yield* Fiber.join(insert)).toBe("foreign key")
          expect([yield* count("webhooks"), yield* count("deliveries")]).toEqual([2, 0])
        }).pipe(Effect.provide(testDatabase(engine))))
    }
  }
})

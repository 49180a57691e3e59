/**
 * The WriteBatcher on PostgreSQL, two transactions in flight: the next begins while the previous
 * one commits, yet each caller is answered only after its own transaction's COMMIT, and a
 * transaction that fails (a COMMIT refused, its connection terminated) fails its own callers only,
 * never those of the transaction running beside it. COMMITs are held by a deferred trigger waiting
 * on an advisory lock the test holds; writes, by a lock taken in the write.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import type { Connection } from "@effect/sql/SqlConnection"
import { expect, layer } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Logger, LogLevel, Option, Schedule } from "effect"
import { Metrics } from "../src/Metrics/Metrics.js"
import { WriteBatcher, WriteBatcherLive } from "../src/Sql/WriteBatcher.js"
import { testDatabase } from "./support/Databases.js"

/** The advisory lock a COMMIT waits on (its transaction inserted into wb_gated), and one a write waits on. */
const COMMIT_GATE = 77
const WRITE_GATE = 78

const Tables = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE wb_items (name text PRIMARY KEY)`
    yield* sql`CREATE TABLE wb_gated (name text PRIMARY KEY, refuse boolean NOT NULL)`
    // Runs at COMMIT: waits for the gate, then refuses the COMMIT if the row says so.
    yield* sql.unsafe(`CREATE FUNCTION wb_gate() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_advisory_xact_lock(${COMMIT_GATE});
        IF NEW.refuse THEN RAISE EXCEPTION 'refused at commit: %', NEW.name; END IF;
        RETURN NEW;
      END $$`)
    yield* sql.unsafe(`CREATE CONSTRAINT TRIGGER wb_gate AFTER INSERT ON wb_gated
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION wb_gate()`)
  }).pipe(Effect.orDie)
)

const Db = Layer.merge(WriteBatcherLive, Tables).pipe(
  Layer.provideMerge(testDatabase("postgres")),
  Layer.provide(Layer.merge(Metrics.Off, Logger.minimumLogLevel(LogLevel.None)))
)

const run = (conn: Connection, statement: string) => Effect.orDie(conn.executeUnprepared(statement, [], undefined))

/** A connection of its own holding both gates (session locks) until `open` is called for each, or the scope closes. */
const gates = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const conn = yield* Effect.orDie(sql.reserve)
  yield* Effect.acquireRelease(
    run(conn, `SELECT pg_advisory_lock(${COMMIT_GATE}), pg_advisory_lock(${WRITE_GATE})`),
    () => run(conn, "SELECT pg_advisory_unlock_all()")
  )
  return { open: (gate: number) => run(conn, `SELECT pg_advisory_unlock(${gate})`) }
})

/** The backend waiting on `gate`, once one is (polled: PostgreSQL tells of no lock wait). */
const waiterOn = (gate: number) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ readonly pid: number }>`SELECT pid FROM pg_locks
      WHERE locktype = 'advisory' AND objid = ${gate} AND NOT granted`.pipe(
      Effect.orDie,
      Effect.flatMap((rows) =>
        Option.match(Option.fromNullable(rows[0]), {
          onNone: () => Effect.fail("no waiter yet" as const),
          onSome: (row) => Effect.succeed(row.pid)
        })
      ),
      Effect.retry(Schedule.spaced("10 millis").pipe(Schedule.upTo("10 seconds"))),
      Effect.orDie
    ))

/** The names in wb_items starting with `prefix`, as any other connection sees them (committed only). */
const committed = (prefix: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) =>
      sql<{ readonly name: string }>`SELECT name FROM wb_items WHERE name LIKE ${`${prefix}%`} ORDER BY name`.pipe(
        Effect.orDie,
        Effect.map((rows) => rows.map((r) => r.name))
      )
  )

/** A write whose transaction's COMMIT waits for COMMIT_GATE (then is refused if `refuse`). */
const gatedWrite = (name: string, refuse: boolean) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batcher = yield* WriteBatcher
    return batcher.run(Effect.zipRight(
      sql`INSERT INTO wb_gated ${sql.insert({ name, refuse })}`,
      Effect.as(sql`INSERT INTO wb_items ${sql.insert({ name })}`, name)
    ))
  })

/** A plain write of one row. */
const plainWrite = (name: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batcher = yield* WriteBatcher
    return batcher.run(Effect.as(sql`INSERT INTO wb_items ${sql.insert({ name })}`, name))
  })

/** Forks writes made together (so they share one transaction), once the batcher could begin one. */
const forkTogether = (writes: ReadonlyArray<Effect.Effect<string, SqlError.SqlError>>) =>
  Effect.fork(Effect.all(writes.map(Effect.exit), { concurrency: "unbounded" }))

const outcomes = (exits: ReadonlyArray<Exit.Exit<string, SqlError.SqlError>>) =>
  exits.map((exit) => Exit.match(exit, { onSuccess: (name) => `ok ${name}`, onFailure: () => "failed" }))

layer(Db, { excludeTestServices: true })("WriteBatcher on PostgreSQL: two transactions in flight", (it) => {
  it.scoped("the next transaction commits while the previous one's COMMIT waits; that one's callers wait for it", () =>
    Effect.gen(function*() {
      const gate = yield* gates
      const first = yield* forkTogether([yield* gatedWrite("a-first", false), yield* plainWrite("a-beside")])
      yield* waiterOn(COMMIT_GATE)

      // Begun while the first COMMITs, on another connection: committed and answered at once.
      expect(yield* (yield* plainWrite("a-next"))).toBe("a-next")
      expect(yield* committed("a-")).toEqual(["a-next"])
      // The first transaction's callers are not answered before its COMMIT is done.
      expect(Option.isNone(yield* Fiber.poll(first))).toBe(true)

      yield* gate.open(COMMIT_GATE)
      expect(outcomes(yield* Fiber.join(first))).toEqual(["ok a-first", "ok a-beside"])
      expect(yield* committed("a-")).toEqual(["a-beside", "a-first", "a-next"])
    }))

  it.scoped("a COMMIT refused fails its own transaction's callers, not those of the one running beside it", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const gate = yield* gates
      const first = yield* forkTogether([yield* gatedWrite("b-refused", true), yield* plainWrite("b-beside")])
      yield* waiterOn(COMMIT_GATE)
      // The next transaction is still running its writes (one waits for WRITE_GATE) when the first fails.
      const waitsInWrite = Effect.as(sql`SELECT pg_advisory_xact_lock(${WRITE_GATE})`, "b-waited")
      const batcher = yield* WriteBatcher
      const next = yield* forkTogether([batcher.run(waitsInWrite), yield* plainWrite("b-next")])
      yield* waiterOn(WRITE_GATE)

      yield* gate.open(COMMIT_GATE)
      expect(outcomes(yield* Fiber.join(first))).toEqual(["failed", "failed"])
      expect(Option.isNone(yield* Fiber.poll(next))).toBe(true)
      yield* gate.open(WRITE_GATE)
      expect(outcomes(yield* Fiber.join(next))).toEqual(["ok b-waited", "ok b-next"])
      expect(yield* committed("b-")).toEqual(["b-next"])
    }))

  it.scoped("a transaction whose connection is terminated fails alone: the next one, running its writes, commits", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const batcher = yield* WriteBatcher
      const gate = yield* gates
      const first = yield* forkTogether([yield* gatedWrite("c-lost", false), yield* plainWrite("c-beside")])
      const firstBackend = yield* waiterOn(COMMIT_GATE)
      const waitsInWrite = Effect.as(sql`SELECT pg_advisory_xact_lock(${WRITE_GATE})`, "c-waited")
      const next = yield* forkTogether([batcher.run(waitsInWrite), yield* plainWrite("c-next")])
      yield* waiterOn(WRITE_GATE)

      // What a PostgreSQL restart does to a connection (SQLSTATE 57P01): the database is unavailable.
      const before = batcher.lastStorageFailureAt()
      yield* Effect.orDie(sql`SELECT pg_terminate_backend(${firstBackend})`)
      expect(outcomes(yield* Fiber.join(first))).toEqual(["failed", "failed"])
      expect(batcher.lastStorageFailureAt()).toBeGreaterThan(before)
      expect(Option.isNone(yield* Fiber.poll(next))).toBe(true)

      yield* gate.open(WRITE_GATE)
      expect(outcomes(yield* Fiber.join(next))).toEqual(["ok c-waited", "ok c-next"])
      expect(yield* committed("c-")).toEqual(["c-next"])
    }))
})

/**
 * The WriteBatcher (group commit) on an in-memory SQLite database: concurrent group writes share one
 * multi-row statement, a bad item or a failing write fails alone while the others commit, a failed
 * COMMIT fails the whole batch, every write sees what was committed before it, and gathering
 * writes wait for a larger transaction unless another write begins one.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Cause, Data, Effect, Either, Exit, Fiber, Layer, Logger, LogLevel, Option } from "effect"
import { Metrics } from "../src/Metrics/Metrics.js"
import { sqliteLayer } from "../src/Sql/Client.js"
import { WriteBatcher, writeBatcherLayer, WriteBatcherLive } from "../src/Sql/WriteBatcher.js"

interface Item {
  readonly name: string
  readonly value: number
}

interface Row {
  readonly name: string
  readonly value: number
}

class Refused extends Data.TaggedError("Refused")<{ readonly reason: string }> {}

const Tables = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE wb_items (name TEXT PRIMARY KEY, value INTEGER NOT NULL CHECK (value >= 0))`
    yield* sql`CREATE TABLE wb_parents (id TEXT PRIMARY KEY)`
    // Checked at COMMIT only: a violation makes the shared transaction's COMMIT fail.
    yield* sql`CREATE TABLE wb_children (
      id TEXT PRIMARY KEY,
      parent TEXT NOT NULL REFERENCES wb_parents (id) DEFERRABLE INITIALLY DEFERRED
    )`
  }).pipe(Effect.orDie)
)

const Db = Layer.merge(WriteBatcherLive, Tables).pipe(
  Layer.provideMerge(sqliteLayer(":memory:")),
  Layer.provide(Layer.merge(Metrics.Off, Logger.minimumLogLevel(LogLevel.None)))
)

/** Statements on wb_items, for writes handed to the batcher (which takes effects needing no services). */
const tableOf = Effect.map(SqlClient.SqlClient, (sql) => ({
  insertOne: (item: Item) => sql`INSERT INTO wb_items ${sql.insert({ ...item })}`,
  /** The names starting with `prefix`, sorted. */
  names: (prefix: string) =>
    Effect.map(
      sql<{ readonly name: string }>`SELECT name FROM wb_items WHERE name LIKE ${`${prefix}%`} ORDER BY name`,
      (rows) => rows.map((r) => r.name)
    ),
  /** The rows whose name starts with `prefix`, by name. */
  rowsLike: (prefix: string) =>
    sql<Row>`SELECT name, value FROM wb_items WHERE name LIKE ${`${prefix}%`} ORDER BY name`.pipe(
      Effect.orDie,
      Effect.map((rows) => rows.map((r) => ({ name: r.name, value: r.value })))
    )
}))

/**
 * A group writer over wb_items recording each statement it makes (the items' names): one multi-row
 * INSERT per call, answering each item with its own row as stored (value times ten, from RETURNING).
 */
const recordingGroup = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const batcher = yield* WriteBatcher
  const statements: Array<ReadonlyArray<string>> = []
  const submit = batcher.groupNow((items: ReadonlyArray<Item>) =>
    Effect.gen(function*() {
      statements.push(items.map((i) => i.name))
      const rows = yield* sql<{ readonly name: string; readonly tenfold: number }>`INSERT INTO wb_items ${
        sql.insert(items.map((i) => ({ ...i })))
      } RETURNING name, value * 10 AS tenfold`
      // RETURNING's order is unspecified: answer by name, in the items' order.
      const byName = new Map(rows.map((r) => [r.name, r.tenfold]))
      return items.map((i) => `${i.name}=${byName.get(i.name) ?? "missing"}`)
    })
  )
  const write = (item: Item) => Effect.async<string, SqlError.SqlError>((resume) => submit(item, resume))
  return { write, statements }
})

const itemsNamed = (prefix: string, count: number): ReadonlyArray<Item> =>
  Array.from({ length: count }, (_, i) => ({ name: `${prefix}${String(i).padStart(3, "0")}`, value: i + 1 }))

const failureTag = <A, E extends { readonly _tag: string }>(outcome: Either.Either<A, E>) =>
  Either.match(outcome, { onLeft: (e) => e._tag, onRight: () => "ok" })

/** "ok <value>", the tag of the typed failure, or "defect". */
const outcomeOf = <A, E extends { readonly _tag: string }>(exit: Exit.Exit<A, E>): string =>
  Exit.match(exit, {
    onSuccess: (value) => `ok ${String(value)}`,
    onFailure: (cause) =>
      Option.match(Cause.failureOption(cause), {
        onSome: (e) => e._tag,
        onNone: () => (Cause.isDie(cause) ? "defect" : Cause.pretty(cause))
      })
  })

layer(Db)("WriteBatcher", (it) => {
  it.effect("concurrent group writes land in one multi-row statement per batch, each caller answered with its own item", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const { write, statements } = yield* recordingGroup
      const items = itemsNamed("a-", 40)
      const answers = yield* Effect.forEach(items, write, { concurrency: "unbounded" })
      expect(answers).toEqual(items.map((i) => `${i.name}=${i.value * 10}`))
      expect(statements).toHaveLength(1)
      expect([...(statements[0] ?? [])].sort()).toEqual(items.map((i) => i.name))
      expect(yield* table.rowsLike("a-")).toEqual(items)

      // The next burst is the next batch: one more statement, with exactly its own items.
      const more = itemsNamed("a2-", 7)
      const moreAnswers = yield* Effect.all(more.map(write), { concurrency: "unbounded" })
      expect(moreAnswers).toEqual(more.map((i) => `${i.name}=${i.value * 10}`))
      expect(statements).toHaveLength(2)
      expect([...(statements[1] ?? [])].sort()).toEqual(more.map((i) => i.name))

      // A lone write is a statement of one item.
      expect(yield* write({ name: "a3-alone", value: 5 })).toBe("a3-alone=50")
      expect(statements).toHaveLength(3)
      expect(statements[2]).toEqual(["a3-alone"])
    }))

  it.effect("two groups and plain writes in the same batch: one statement per group, everything committed", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const first = yield* recordingGroup
      const second = yield* recordingGroup
      const batcher = yield* WriteBatcher
      const left = itemsNamed("g-left-", 5)
      const right = itemsNamed("g-right-", 4)
      const [leftAnswers, rightAnswers, plain] = yield* Effect.all([
        Effect.forEach(left, first.write, { concurrency: "unbounded" }),
        Effect.forEach(right, second.write, { concurrency: "unbounded" }),
        batcher.run(Effect.as(table.insertOne({ name: "g-plain", value: 1 }), "plain done"))
      ], { concurrency: "unbounded" })
      expect(leftAnswers).toEqual(left.map((i) => `${i.name}=${i.value * 10}`))
      expect(rightAnswers).toEqual(right.map((i) => `${i.name}=${i.value * 10}`))
      expect(plain).toBe("plain done")
      expect(first.statements).toHaveLength(1)
      expect(second.statements).toHaveLength(1)
      expect(yield* table.rowsLike("g-")).toHaveLength(left.length + right.length + 1)
    }))

  it.effect("a group item violating a constraint fails only its caller; the others succeed and are committed", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const { write, statements } = yield* recordingGroup
      expect(yield* write({ name: "b-taken", value: 1 })).toBe("b-taken=10")
      statements.length = 0

      const items: ReadonlyArray<Item> = [
        { name: "b-1", value: 1 },
        { name: "b-2", value: 2 },
        { name: "b-taken", value: 99 }, // primary key already used
        { name: "b-3", value: 3 },
        { name: "b-negative", value: -1 }, // CHECK constraint
        { name: "b-4", value: 4 }
      ]
      const outcomes = yield* Effect.forEach(items, (item) => Effect.either(write(item)), { concurrency: "unbounded" })
      expect(outcomes.map(failureTag)).toEqual(["ok", "ok", "SqlError", "ok", "SqlError", "ok"])
      expect(outcomes.map((o) => Either.getOrElse(o, () => "failed"))).toEqual([
        "b-1=10",
        "b-2=20",
        "failed",
        "b-3=30",
        "failed",
        "b-4=40"
      ])

      // The multi-row statement failed as a whole, then each item was written alone.
      expect(statements).toHaveLength(1 + items.length)
      expect([...(statements[0] ?? [])].sort()).toEqual(items.map((i) => i.name).sort())
      expect(statements.slice(1).map((s) => s.length)).toEqual(items.map(() => 1))

      expect(yield* table.rowsLike("b-")).toEqual([
        { name: "b-1", value: 1 },
        { name: "b-2", value: 2 },
        { name: "b-3", value: 3 },
        { name: "b-4", value: 4 },
        { name: "b-taken", value: 1 }
      ])
    }))

  it.effect("two callers writing the same key in one group: the first wins, only the second fails", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const { write } = yield* recordingGroup
      const outcomes = yield* Effect.all([
        Effect.either(write({ name: "c-same", value: 1 })),
        Effect.either(write({ name: "c-same", value: 2 })),
        Effect.either(write({ name: "c-other", value: 3 }))
      ], { concurrency: "unbounded" })
      expect(outcomes.map(failureTag)).toEqual(["ok", "SqlError", "ok"])
      expect(yield* table.rowsLike("c-")).toEqual([{ name: "c-other", value: 3 }, { name: "c-same", value: 1 }])
    }))

  it.effect("run: a failing write is rolled back alone (its earlier statements too); the batch's other writes commit", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const batcher = yield* WriteBatcher
      const writes = [
        batcher.run(
          Effect.zipRight(
            table.insertOne({ name: "d-a1", value: 1 }),
            Effect.as(table.insertOne({ name: "d-a2", value: 2 }), "a")
          )
        ),
        // A typed failure after a successful statement.
        batcher.run(Effect.zipRight(table.insertOne({ name: "d-b1", value: 1 }), new Refused({ reason: "no" }))),
        // A constraint violation after a successful statement.
        batcher.run(
          Effect.zipRight(
            table.insertOne({ name: "d-c1", value: 1 }),
            Effect.as(table.insertOne({ name: "d-a1", value: 9 }), "c")
          )
        ),
        // A defect after a successful statement.
        batcher.run(Effect.zipRight(table.insertOne({ name: "d-e1", value: 1 }), Effect.dieMessage("boom"))),
        batcher.runStatement(Effect.as(table.insertOne({ name: "d-d", value: 4 }), "d")),
        batcher.runStatement(Effect.as(table.insertOne({ name: "d-d", value: 5 }), "d again"))
      ]
      const outcomes = yield* Effect.forEach(writes, Effect.exit, { concurrency: "unbounded" })
      expect(outcomes.map(outcomeOf)).toEqual(["ok a", "Refused", "SqlError", "defect", "ok d", "SqlError"])
      expect(yield* table.rowsLike("d-")).toEqual([
        { name: "d-a1", value: 1 },
        { name: "d-a2", value: 2 },
        { name: "d-d", value: 4 }
      ])
    }))

  it.effect("a write sees every write committed before it, and the earlier writes of its own batch", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const batcher = yield* WriteBatcher
      const { write } = yield* recordingGroup

      yield* Effect.forEach(itemsNamed("f-", 3), write, { concurrency: "unbounded", discard: true })
      // Made after those were answered: it sees all three.
      const seen = yield* batcher.run(Effect.zipLeft(table.names("f-"), table.insertOne({ name: "f-later", value: 1 })))
      expect(seen).toEqual(["f-000", "f-001", "f-002"])

      // In one batch, writes run in the order they were made: each sees the earlier ones, never a rolled-back one.
      const [first, failed, third, fourth] = yield* Effect.all([
        batcher.run(Effect.zipRight(table.insertOne({ name: "f-x1", value: 1 }), table.names("f-x"))),
        Effect.either(
          batcher.run(
            Effect.zipRight(table.insertOne({ name: "f-x2", value: 1 }), new Refused({ reason: "rolled back" }))
          )
        ),
        batcher.runStatement(Effect.as(table.insertOne({ name: "f-x3", value: 1 }), "x3")),
        batcher.run(table.names("f-x"))
      ], { concurrency: "unbounded" })
      expect(first).toEqual(["f-x1"])
      expect(failureTag(failed)).toBe("Refused")
      expect(third).toBe("x3")
      expect(fourth).toEqual(["f-x1", "f-x3"])
      expect(yield* table.names("f-")).toEqual(["f-000", "f-001", "f-002", "f-later", "f-x1", "f-x3"])
    }))

  it.effect("a write already queued is committed even if its caller is interrupted", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const batcher = yield* WriteBatcher
      const fiber = yield* Effect.fork(batcher.run(table.insertOne({ name: "h-abandoned", value: 1 })))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
      // Any later write is answered after the batch holding the abandoned one.
      yield* batcher.run(Effect.void)
      expect(yield* table.rowsLike("h-")).toEqual([{ name: "h-abandoned", value: 1 }])
    }))
})

// On a database of its own: SQLite keeps a transaction open when its COMMIT fails on a deferred
// constraint; the batcher must roll it back so the connection serves the next batch.
layer(Db)("WriteBatcher: a failed COMMIT", (it) => {
  it.effect("fails every write of the batch, plain writes and group items alike", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const sql = yield* SqlClient.SqlClient
      const batcher = yield* WriteBatcher
      const { write, statements } = yield* recordingGroup
      const orphan = sql`INSERT INTO wb_children ${sql.insert({ id: "e-orphan", parent: "e-missing" })}`
      const outcomes = yield* Effect.all([
        Effect.exit(batcher.run(Effect.as(table.insertOne({ name: "e-1", value: 1 }), "e-1"))),
        Effect.exit(batcher.runStatement(Effect.as(orphan, "orphan"))),
        Effect.exit(write({ name: "e-2", value: 2 })),
        Effect.exit(write({ name: "e-3", value: 3 }))
      ], { concurrency: "unbounded" })
      // Every write ran (the group in one statement) and succeeded on its own, yet the COMMIT's failure is every caller's.
      expect(statements).toEqual([["e-2", "e-3"]])
      expect(outcomes.map(Exit.isFailure)).toEqual([true, true, true, true])
      // Nothing of the failed batch is kept, and the next batch begins and commits.
      expect(yield* table.rowsLike("e-")).toEqual([])
      yield* batcher.run(table.insertOne({ name: "e-after", value: 4 }))
      expect(yield* table.rowsLike("e-")).toEqual([{ name: "e-after", value: 4 }])
    }))
})

/** Some turns of the event loop: a batch not gathering would have begun within the first. */
const eventLoopTurns = (n: number) =>
  Effect.promise(() =>
    Array.from({ length: n }).reduce<Promise<void>>(
      (turns) => turns.then(() => new Promise((done) => setImmediate(done))),
      Promise.resolve()
    )
  )

// A gathering time no test outlasts: a gathering write that waits for it shows as not run.
const Gathering = Layer.merge(writeBatcherLayer({ gatherMs: 60_000 }), Tables).pipe(
  Layer.provideMerge(sqliteLayer(":memory:")),
  Layer.provide(Layer.merge(Metrics.Off, Logger.minimumLogLevel(LogLevel.None)))
)

layer(Gathering)("WriteBatcher: gathering writes", (it) => {
  it.effect("the first after a quiet spell begins at once; later ones wait, and a plain write carries them into its transaction", () =>
    Effect.gen(function*() {
      const table = yield* tableOf
      const batcher = yield* WriteBatcher
      const log: Array<string> = []
      const step = (name: string) => Effect.sync(() => log.push(name))

      yield* batcher.gather(Effect.zipRight(table.insertOne({ name: "k-first", value: 1 }), step("first ran")))
      expect(log).toEqual(["first ran"])

      const second = yield* Effect.fork(Effect.zipRight(batcher.gather(step("second ran")), step("second answered")))
      yield* eventLoopTurns(3)
      const third = yield* Effect.fork(Effect.zipRight(batcher.gather(step("third ran")), step("third answered")))
      yield* eventLoopTurns(3)
      expect(log).toEqual(["first ran"])

      yield* Effect.zipRight(batcher.run(step("plain ran")), step("plain answered"))
      yield* Fiber.join(second)
      yield* Fiber.join(third)
      // One transaction: all three ran before any was answered.
      expect(log.slice(0, 4)).toEqual(["first ran", "second ran", "third ran", "plain ran"])
      expect([...log.slice(4)].sort()).toEqual(["plain answered", "second answered", "third answered"])
      expect(yield* table.rowsLike("k-")).toEqual([{ name: "k-first", value: 1 }])
    }))
})

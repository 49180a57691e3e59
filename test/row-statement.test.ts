/**
 * Row statements (src/Sql/RowStatement.ts) on an in-memory SQLite database: each row binds its
 * values by name, wherever and however often the names appear; each row's RETURNING rows come back
 * in order; outside a transaction the rows are written in one of their own; a statement naming a
 * parameter it was not given is a defect, not a silent misbinding.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer } from "effect"
import { sqliteLayer } from "../src/Sql/Client.js"
import { insertMany, insertRow, insertRows, rowStatement } from "../src/Sql/RowStatement.js"
import { engines, testDatabase } from "./support/Databases.js"

const Tables = Layer.effectDiscard(
  SqlClient.SqlClient.pipe(
    Effect.flatMap((sql) => sql`CREATE TABLE rs_items (name TEXT PRIMARY KEY, value INTEGER NOT NULL, note TEXT)`),
    Effect.orDie
  )
)

const Db = Tables.pipe(Layer.provideMerge(sqliteLayer(":memory:")))

layer(Db)("row statements", (it) => {
  it.effect("insert rows by column name, return each row's RETURNING rows in order, and bind names used twice", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const insert = insertRow(
        sql,
        "rs_items",
        ["note", "value", "name"],
        "ON CONFLICT (name) DO NOTHING RETURNING name"
      )
      const results = yield* sql.withTransaction(insert([
        { name: "a", value: 1, note: null },
        { name: "b", value: 2, note: "second" },
        { name: "a", value: 3, note: "again" }
      ]))
      // The repeated key returns no row: it was not written.
      expect(results).toEqual([[{ name: "a" }], [{ name: "b" }], []])

      const bump = rowStatement(
        sql,
        ["name", "by"],
        (p) =>
          sql`UPDATE rs_items SET value = value + ${p("by")}, note = ${p("name")} || '+' || ${p("by")} WHERE name = ${
            p("name")
          }`
      )
      // Outside a transaction: written in one of its own.
      yield* bump([{ by: 10, name: "a" }, { by: 20, name: "b" }])
      expect(yield* sql`SELECT name, value, note FROM rs_items ORDER BY name`).toEqual([
        { name: "a", value: 11, note: "a+10" },
        { name: "b", value: 22, note: "b+20" }
      ])
    }))

  it.effect("a statement with a parameter that is not a named one dies, and writes nothing", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const wrong = rowStatement(
        sql,
        ["name"],
        (p) => sql`INSERT INTO rs_items (name, value) VALUES (${p("name")}, ${7})`
      )
      const outcome = yield* Effect.exit(wrong([{ name: "z" }]))
      expect(Exit.isFailure(outcome) && Cause.isDie(outcome.cause)).toBe(true)
      expect(yield* sql`SELECT name FROM rs_items WHERE name = 'z'`).toEqual([])
    }))
})

for (const engine of engines) {
  layer(Tables.pipe(Layer.provideMerge(testDatabase(engine))))(`rows inserted together (${engine})`, (it) => {
    it.effect("insertRows writes every row (one statement on PostgreSQL) and answers the RETURNING rows of all; a repeated key is not written", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const insert = insertRows(
          sql,
          "rs_items",
          ["note", "value", "name"],
          "ON CONFLICT (name) DO NOTHING RETURNING name"
        )
        const returned = yield* sql.withTransaction(insert([
          { name: "a", value: 1, note: null },
          { name: "b", value: 2, note: "second" },
          { name: "a", value: 3, note: "again" }
        ]))
        expect(returned).toEqual([{ name: "a" }, { name: "b" }])
        expect(yield* insert([{ name: "b", value: 9, note: null }, { name: "c", value: 4, note: "third" }])).toEqual([{
          name: "c"
        }])
        expect(yield* sql`SELECT name, value, note FROM rs_items ORDER BY name`).toEqual([
          { name: "a", value: 1, note: null },
          { name: "b", value: 2, note: "second" },
          { name: "c", value: 4, note: "third" }
        ])
        expect(yield* insert([])).toEqual([])
      }))

    it.effect("insertMany writes 1,300 rows with the first row's columns (a key a later row lacks is NULL), the tail applied to each", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`DELETE FROM rs_items`
        yield* sql`INSERT INTO rs_items (name, value, note) VALUES ('m0007', 0, 'kept')`
        // More rows than one PostgreSQL statement carries (1,000), and an odd count for SQLite's chunks.
        const rows = Array.from({ length: 1300 }, (_, i) => ({
          name: `m${String(i).padStart(4, "0")}`,
          value: i,
          ...(i === 1 ? {} : { note: `n${i}` })
        }))
        yield* sql.withTransaction(insertMany(sql, "rs_items", rows, "ON CONFLICT (name) DO NOTHING"))
        expect(yield* insertMany(sql, "rs_items", [])).toBeUndefined()
        const stored = yield* sql<{ readonly name: string; readonly value: number; readonly note: string | null }>`
          SELECT name, value, note FROM rs_items ORDER BY name`
        expect(stored).toHaveLength(1300)
        expect(stored.slice(0, 3)).toEqual([
          { name: "m0000", value: 0, note: "n0" },
          { name: "m0001", value: 1, note: null },
          { name: "m0002", value: 2, note: "n2" }
        ])
        // The row stored before was not overwritten (the tail), and the last rows are in.
        expect(stored[7]).toEqual({ name: "m0007", value: 0, note: "kept" })
        expect(stored[1299]).toEqual({ name: "m1299", value: 1299, note: "n1299" })
      }))
  })
}

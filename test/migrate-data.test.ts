/**
 * `hub migrate-data --from <sqlite file> --to <postgres url>` through the real command line: a SQLite
 * hub's tenancy, tokens, messages, webhooks and delivery log are served by a hub on PostgreSQL
 * afterwards; a target that holds rows is refused; a source that does not exist is refused.
 */
import { SqlClient } from "@effect/sql"
import { expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Layer, Option, Redacted, Schema, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freshPostgresDatabase } from "./support/Databases.js"
import { makeReceiver } from "./support/Receivers.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const main = join(import.meta.dirname, "..", "src", "main.ts")
const secretKey = Option.some(Redacted.make(new Uint8Array(32).fill(11)))

const cliWith = (
  input: { readonly env?: Record<string, string>; readonly stdin?: string },
  ...args: ReadonlyArray<string>
) => {
  const result = Bun.spawnSync([process.execPath, main, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    stdin: input.stdin === undefined ? "ignore" : Buffer.from(input.stdin),
    env: { ...process.env, HUB_LOG_LEVEL: "warning", ...input.env }
  })
  return { exitCode: result.exitCode, stdout: result.stdout.toString(), stderr: result.stderr.toString() }
}
const cli = (...args: ReadonlyArray<string>) => cliWith({}, ...args)

/** The URL without its password, and the password. */
const withoutPassword = (url: string) => {
  const parsed = new URL(url)
  const password = decodeURIComponent(parsed.password)
  parsed.password = ""
  return { url: parsed.toString(), password }
}

/** What the command prints. */
const Report = Schema.Struct({
  rows: Schema.Number,
  tables: Schema.Array(Schema.Struct({ table: Schema.String, rows: Schema.Number }))
})

const request = (method: string, path: string, token: string, json?: unknown) =>
  Effect.flatMap(TestHub, (hub) => hub.request(method, path, json === undefined ? { token } : { token, json }))

it.live(
  "a SQLite hub's data moves to PostgreSQL and is served from there; a used target or a missing source is refused",
  () =>
    Effect.gen(function*() {
      const folder = mkdtempSync(join(tmpdir(), "hub-migrate-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
      const file = join(folder, "hub.sqlite")
      const receiver = yield* makeReceiver()

      // The hub on SQLite: a tenant, a message, a webhook with one delivery, an extra token.
      const sqliteScope = yield* Scope.make()
      const onSqlite = yield* Layer.buildWithScope(
        testHub({ databaseFile: file, secretKey, sandboxStatusDelay: Duration.hours(1) }),
        sqliteScope
      )
      const seeded = yield* Effect.provide(
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const sent = yield* request("POST", "/api/messages", tenant.instanceToken, {
            messaging_product: "whatsapp",
            to: "16505551234",
            type: "text",
            text: { body: "moved" }
          })
          expect(sent.status).toBe(200)
          const hook = yield* request("POST", "/api/webhooks", tenant.instanceToken, {
            url: receiver.url,
            name: "moved"
          })
          expect(hook.status).toBe(201)
          const posted = yield* request(
            "POST",
            "/upstream/events",
            tenant.instanceToken,
            envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
          )
          expect(posted.status).toBe(200)
          yield* receiver.waitFor("the delivery", (r) => r.length === 1)
          const extra = yield* request("POST", "/api/auth/api-tokens", tenant.sessionToken, { name: "kept" })
          // More rows than two reads of the source take (2,000 each), and text that must arrive unchanged.
          const sql = yield* SqlClient.SqlClient
          yield* sql`INSERT INTO unrouted_events ${
            sql.insert(Array.from({ length: 4500 }, (_, i) => ({
              id: `unr_${String(i).padStart(5, "0")}`,
              phone_number_id: "999",
              waba_id: null,
              field: "messages",
              change_json: JSON.stringify({ n: i, text: "é ✓ \"quoted\"" }),
              received_at: new Date(1_750_000_000_000 + i).toISOString()
            })))
          }`
          return {
            tenant,
            messageId: String(itemsOf(sent.body, "messages")[0]?.id),
            webhookId: String(hook.body.id),
            extraToken: String(extra.body.token)
          }
        }),
        onSqlite
      )
      // The delivery's outcome is committed before the hub stops (the dispatcher logs it as it drains).
      yield* Scope.close(sqliteScope, Exit.void)

      const url = yield* freshPostgresDatabase
      // The password is read from standard input (kept out of `ps` and the shell's history).
      const target = withoutPassword(url)
      expect(target.url).not.toContain(target.password)
      const moved = cliWith(
        { stdin: `${target.password}\n` },
        "migrate-data",
        "--from",
        file,
        "--to",
        target.url,
        "--password-stdin"
      )
      expect(moved.stderr).toBe("")
      expect(moved.exitCode).toBe(0)
      const report = Schema.decodeUnknownSync(Report)(JSON.parse(moved.stdout))
      const rowsOf = (table: string) => report.tables.find((t) => t.table === table)?.rows
      expect(rowsOf("organizations")).toBe(1)
      expect(rowsOf("messages")).toBe(1)
      expect(rowsOf("deliveries")).toBe(1)
      expect(rowsOf("delivery_attempts")).toBe(1)
      expect(rowsOf("unrouted_events")).toBe(4500)
      // Tables come after those they reference.
      const order = report.tables.map((t) => t.table)
      expect(order.indexOf("organizations")).toBeLessThan(order.indexOf("instances"))
      expect(order.indexOf("deliveries")).toBeLessThan(order.indexOf("delivery_attempts"))

      // The hub on PostgreSQL serves the same data, with the same tokens and secrets.
      const onPostgres = yield* Layer.build(
        testHub({ engine: "postgres", databaseFile: url, secretKey, sandboxStatusDelay: Duration.hours(1) })
      )
      yield* Effect.provide(
        Effect.gen(function*() {
          const { tenant } = seeded
          const messages = yield* request("GET", "/api/messages", tenant.instanceToken)
          expect(messages.status).toBe(200)
          expect(messages.body.total).toBe(1)
          expect(itemsOf(messages.body)[0]?.waMessageId).toBe(seeded.messageId)
          const deliveries = yield* request("GET", `/api/webhooks/${seeded.webhookId}/deliveries`, tenant.instanceToken)
          expect(itemsOf(deliveries.body).map((d) => d.status)).toEqual(["succeeded"])
          expect((yield* request("GET", "/api/instances", seeded.extraToken)).status).toBe(200)
          const sql = yield* SqlClient.SqlClient
          const unrouted = yield* sql<
            { readonly change_json: string }
          >`SELECT change_json FROM unrouted_events WHERE id = 'unr_04499'`
          expect(JSON.parse(unrouted[0]?.change_json ?? "null")).toEqual({ n: 4499, text: "é ✓ \"quoted\"" })
          // The webhook's secret still decrypts: a new event is delivered, signed.
          yield* request(
            "POST",
            "/upstream/events",
            tenant.instanceToken,
            envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263774))]])
          )
          yield* receiver.waitFor("a delivery from the hub on PostgreSQL", (r) => r.length === 2)
        }),
        onPostgres
      )

      // Run again, the password from PGPASSWORD as libpq takes it: the target now holds rows, and is refused.
      const again = cliWith(
        { env: { PGPASSWORD: target.password } },
        "migrate-data",
        "--from",
        file,
        "--to",
        target.url
      )
      expect(again.exitCode).toBe(1)
      expect(JSON.parse(again.stderr).error).toMatch(/^the target is not empty \(table \w+ has \d+ rows\)/)
      const missing = cli("migrate-data", "--from", join(folder, "none.sqlite"), "--to", url)
      expect(missing.exitCode).toBe(1)
      expect(JSON.parse(missing.stderr)).toEqual({
        error: `--from ${join(folder, "none.sqlite")}: no such SQLite file`
      })
      // Without a password anywhere the server refuses the connection, and the command says so.
      const noPassword = cliWith({ env: { PGPASSWORD: "" } }, "migrate-data", "--from", file, "--to", target.url)
      expect(noPassword.exitCode).toBe(1)
      const bothPasswords = cliWith({ stdin: "x" }, "migrate-data", "--from", file, "--to", url, "--password-stdin")
      expect(JSON.parse(bothPasswords.stderr)).toEqual({
        error: "give the password in --to or with --password-stdin, not both"
      })
    }).pipe(Effect.scoped),
  { timeout: 60_000 }
)

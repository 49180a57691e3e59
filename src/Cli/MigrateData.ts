/** `hub migrate-data`: copies a SQLite hub into an empty PostgreSQL database. It opens the two databases it names, not HUB_DB. */
import { Command, Options } from "@effect/cli"
import { Effect, Schema } from "effect"
import { migrateData } from "../Sql/MigrateData.js"
import { readStandardInput } from "./Options.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

/** What was copied: each table's rows, and their sum. */
const MigrationReport = Schema.Struct({
  tables: Schema.Array(Schema.Struct({ table: Schema.String, rows: Schema.Number })),
  rows: Schema.Number
})

/**
 * The target URL with its password: the URL's own, or (so that it stays out of `ps` and the shell's
 * history) the one read from standard input with --password-stdin, or PGPASSWORD as libpq reads it.
 */
const targetWithPassword = (options: { readonly to: string; readonly passwordStdin: boolean }) =>
  Effect.gen(function*() {
    if (!URL.canParse(options.to)) {
      return yield* new CliError({ message: "--to must be a postgres://user@host:port/database URL" })
    }
    const url = new URL(options.to)
    const fromStdin = options.passwordStdin ? yield* readStandardInput : undefined
    if (fromStdin === "") {
      return yield* new CliError({ message: "--password-stdin read no password from standard input" })
    }
    if (fromStdin !== undefined && url.password !== "") {
      return yield* new CliError({ message: "give the password in --to or with --password-stdin, not both" })
    }
    const fromEnvironment = process.env.PGPASSWORD?.trim()
    const password = fromStdin ??
      (url.password === "" && fromEnvironment !== undefined && fromEnvironment !== "" ? fromEnvironment : undefined)
    if (password !== undefined) url.password = password
    return url.toString()
  })

export const migrateDataCommand = Command.make("migrate-data", {
  from: Options.text("from").pipe(Options.withDescription("the SQLite database file of the hub to move")),
  to: Options.text("to").pipe(Options.withDescription(
    "postgres://user@host:port/database: a database no hub has used (its password from --password-stdin or PGPASSWORD; in the URL it shows in `ps`)"
  )),
  passwordStdin: Options.boolean("password-stdin").pipe(
    Options.withDescription("Read the PostgreSQL password from standard input")
  )
}, (options) =>
  targetWithPassword(options).pipe(
    Effect.flatMap((to) => migrateData({ from: options.from, to })),
    Effect.catchAllDefect((defect) =>
      Effect.fail(new CliError({ message: `migrate-data failed, nothing was kept: ${String(defect)}` }))
    ),
    Effect.mapError((e) => new CliError({ message: e.message })),
    Effect.flatMap(printWith(MigrationReport))
  )).pipe(Command.withDescription("Copy every table of a SQLite hub into an empty PostgreSQL database"))

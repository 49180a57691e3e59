/** `hub events`: upstream events the hub keeps aside. */
import { Command, Options } from "@effect/cli"
import { Effect, Schema } from "effect"
import { UnroutedChange, UnroutedRepo } from "../UpstreamEvents/Unrouted.js"
import { UnroutedOnDatabase } from "./Database.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

const eventsUnrouted = Command.make("unrouted", {
  limit: Options.integer("limit").pipe(
    Options.withDefault(100),
    Options.withDescription("At most this many, from 1 to 10000")
  )
}, ({ limit }) =>
  Effect.gen(function*() {
    if (limit < 1 || limit > 10_000) {
      return yield* new CliError({ message: "--limit must be a whole number from 1 to 10000" })
    }
    const changes = yield* Effect.flatMap(UnroutedRepo, (repo) => repo.list(limit))
    yield* printWith(Schema.Struct({ data: Schema.Array(UnroutedChange) }))({ data: changes })
  })).pipe(Command.withDescription("Upstream changes for phone numbers no instance is bound to, newest first"))

export const eventsCommand = Command.make("events").pipe(
  Command.withDescription("Upstream events the hub keeps aside"),
  Command.withSubcommands([eventsUnrouted]),
  Command.provide(UnroutedOnDatabase)
)

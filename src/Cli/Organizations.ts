/** `hub org`: organizations, each of which owns instances and api tokens. */
import { Command } from "@effect/cli"
import { Effect, Option, Schema } from "effect"
import { IsoTimestamp } from "../Domain/Schemas.js"
import { InstancesRepo } from "../Instances/Repo.js"
import { InstancesOnDatabase } from "./Database.js"
import { nonEmpty } from "./Options.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

/** An organization as the command line prints it (the HTTP API has no organization record). */
const OrganizationRecord = Schema.Struct({ id: Schema.String, name: Schema.String, created_at: IsoTimestamp })

/** The organization an `--org` names, or the operator is told it was not found. */
export const requireOrganization = (id: string) =>
  Effect.flatMap(InstancesRepo, (repo) => repo.findOrganization(id)).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new CliError({ message: `organization ${id} was not found` })),
      onSome: Effect.succeed
    }))
  )

const orgCreate = Command.make(
  "create",
  { name: nonEmpty("name", "The organization's name") },
  ({ name }) =>
    Effect.flatMap(InstancesRepo, (repo) => repo.createOrganization(name)).pipe(
      Effect.flatMap(printWith(OrganizationRecord))
    )
).pipe(Command.withDescription("Create an organization; prints {id, name, created_at}"))

const orgList = Command.make("list", {}, () =>
  Effect.flatMap(InstancesRepo, (repo) => repo.listOrganizations).pipe(
    Effect.map((organizations) => ({ data: organizations })),
    Effect.flatMap(printWith(Schema.Struct({ data: Schema.Array(OrganizationRecord) })))
  )).pipe(Command.withDescription("List every organization, oldest first; prints {data: [{id, name, created_at}]}"))

export const organizationsCommand = Command.make("org").pipe(
  Command.withDescription("Organizations: each owns instances and api tokens"),
  Command.withSubcommands([orgCreate, orgList]),
  Command.provide(InstancesOnDatabase)
)

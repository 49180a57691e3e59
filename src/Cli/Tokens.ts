/** `hub token`: api tokens, organization tokens and instance tokens, printed as the HTTP API answers them. */
import { Args, Command, Options } from "@effect/cli"
import { Effect, Option, Schema } from "effect"
import { ApiTokenCreated, apiTokenCreated, ApiTokenList, apiTokenSummary } from "../ApiTokens/Api.js"
import { TokensRepo } from "../ApiTokens/Repo.js"
import { InstancesRepo } from "../Instances/Repo.js"
import { TokensOnDatabase } from "./Database.js"
import { nonEmpty, orgOption } from "./Options.js"
import { requireOrganization } from "./Organizations.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

/** A revoked token (the HTTP API answers its revocation with no body). */
const ApiTokenRevoked = Schema.Struct({
  id: Schema.String,
  organization_id: Schema.String,
  revoked: Schema.Literal(true)
})

/** The instance an `--instance` names, which must belong to the organization; none without the option. */
const instanceOf = (organizationId: string, instanceId: Option.Option<string>) =>
  Effect.flatMap(InstancesRepo, (instances) =>
    Option.match(instanceId, {
      onNone: () => Effect.succeedNone,
      onSome: (id) =>
        instances.findById(id).pipe(
          Effect.map(Option.filter((row) => row.organization_id === organizationId)),
          Effect.flatMap(Option.match({
            onNone: () =>
              Effect.fail(new CliError({ message: `instance ${id} was not found in organization ${organizationId}` })),
            onSome: Effect.succeedSome
          }))
        )
    }))

const tokenCreate = Command.make("create", {
  org: orgOption,
  instance: Options.optional(
    Options.text("instance").pipe(Options.withDescription("Makes it an instance token for this instance (ins_…)"))
  ),
  name: nonEmpty("name", "The token's name")
}, (options) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(options.org)
    const instance = yield* instanceOf(organization.id, options.instance)
    const { row, secret } = yield* Effect.flatMap(TokensRepo, (repo) =>
      repo.createApiToken({
        organizationId: organization.id,
        instanceId: Option.getOrUndefined(Option.map(instance, (i) => i.id)),
        name: options.name
      }))
    yield* printWith(ApiTokenCreated)(apiTokenCreated(row, secret))
  })).pipe(
    Command.withDescription(
      "Create an api token (an organization token, or an instance token with --instance); prints it with its secret, shown only now"
    )
  )

const tokenList = Command.make("list", { org: orgOption }, ({ org }) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(org)
    const rows = yield* Effect.flatMap(TokensRepo, (repo) => repo.listApiTokens(organization.id))
    yield* printWith(ApiTokenList)({ data: rows.map(apiTokenSummary) })
  })).pipe(
    Command.withDescription(
      "List an organization's live api tokens, newest first, without secrets; prints {data: [...]}"
    )
  )

const tokenRevoke = Command.make("revoke", {
  id: Args.text({ name: "id" }).pipe(Args.withDescription("The api token's id (tok_…; see `hub token list`)"))
}, ({ id }) =>
  Effect.gen(function*() {
    const tokens = yield* TokensRepo
    const token = yield* tokens.findApiToken(id)
    if (Option.isNone(token)) {
      return yield* new CliError({ message: `api token ${id} was not found (or is already revoked)` })
    }
    // Committed with the revocation feed's rows: every serving hub on this database drops it within about 1 s.
    yield* tokens.revokeApiToken(token.value.organization_id, id)
    yield* printWith(ApiTokenRevoked)({ id, organization_id: token.value.organization_id, revoked: true })
  })).pipe(
    Command.withDescription("Revoke an api token: it is refused from then on; prints {id, organization_id, revoked}")
  )

export const tokensCommand = Command.make("token").pipe(
  Command.withDescription("Api tokens: organization tokens and instance tokens"),
  Command.withSubcommands([tokenCreate, tokenList, tokenRevoke]),
  Command.provide(TokensOnDatabase)
)

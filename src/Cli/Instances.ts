/** `hub instance`: instances, each bound to one business phone number. */
import { Args, Command, Options } from "@effect/cli"
import { Effect, Option, Schema } from "effect"
import { HubConfig } from "../Config.js"
import { InstanceRecord, instanceRecord } from "../Instances/Api.js"
import { type InstanceRow, InstancesRepo, marketingMessagesModes } from "../Instances/Repo.js"
import { sendRateOf } from "../PhoneNumbers/Throughput.js"
import { ThroughputRepo } from "../PhoneNumbers/ThroughputRepo.js"
import { InstancesWithLevelsOnDatabase } from "./Database.js"
import { graphId, nonEmpty, orgOption, readStandardInput } from "./Options.js"
import { requireOrganization } from "./Organizations.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

const { id, ...instanceFields } = InstanceRecord.fields

/** An instance as the API shows it, with the organization it belongs to (the operator sees every organization's). */
const OrganizationInstanceRecord = Schema.Struct({ id, organization_id: Schema.String, ...instanceFields })

/** An instance as the API shows it, with its organization, at its number's send rate. */
const organizationInstance = (row: InstanceRow, sendRate: number): typeof OrganizationInstanceRecord.Type => ({
  ...instanceRecord(row, sendRate),
  organization_id: row.organization_id
})

const printInstance = printWith(OrganizationInstanceRecord)

const marketingMessagesOption = Options.choice("marketing-messages", marketingMessagesModes).pipe(
  Options.withDescription(
    "auto: MARKETING template sends go to the Marketing Messages API (/marketing_messages) by the template's category; off: every send to /messages"
  )
)

const instanceList = Command.make("list", {
  org: Options.optional(orgOption.pipe(Options.withDescription("Only this organization's instances")))
}, ({ org }) =>
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const { sendRateCap } = yield* HubConfig
    const levels = yield* Effect.orDie((yield* ThroughputRepo).levels)
    const rows = yield* Option.match(org, {
      onNone: () => repo.listInstances,
      onSome: (id) =>
        Effect.flatMap(requireOrganization(id), (organization) => repo.listByOrganization(organization.id))
    })
    yield* printWith(Schema.Struct({ data: Schema.Array(OrganizationInstanceRecord) }))({
      data: rows.map((row) => organizationInstance(row, sendRateOf(levels.get(row.phone_number_id), sendRateCap)))
    })
  })).pipe(Command.withDescription(
    "List instances (of one organization with --org), oldest first; prints {data: [{id, organization_id, name, phone_number_id, waba_id, " +
      "send_rate, marketing_messages, created_at}]}"
  ))

/** The access token given with --access-token, or read (trimmed) from standard input with --access-token-stdin. */
const accessTokenOf = (
  options: { readonly accessToken: Option.Option<string>; readonly accessTokenStdin: boolean }
) => {
  if (!options.accessTokenStdin) return Effect.succeed(options.accessToken)
  if (Option.isSome(options.accessToken)) {
    return Effect.fail(
      new CliError({ message: "give the access token with --access-token or --access-token-stdin, not both" })
    )
  }
  return readStandardInput.pipe(
    Effect.filterOrFail(
      (token) => token !== "",
      () => new CliError({ message: "--access-token-stdin read no access token from standard input" })
    ),
    Effect.map(Option.some)
  )
}

const instanceCreate = Command.make("create", {
  org: orgOption,
  name: nonEmpty("name", "The instance's name"),
  phoneNumberId: graphId("phone-number-id", "The upstream's phone number id (digits) the instance sends from"),
  wabaId: graphId("waba-id", "The upstream's business account id (digits) the number belongs to"),
  accessToken: Options.optional(
    Options.text("access-token").pipe(
      Options.withDescription("The upstream access token for this number (stored encrypted); the sandbox needs none")
    )
  ),
  accessTokenStdin: Options.boolean("access-token-stdin").pipe(
    Options.withDescription(
      "Read the access token from standard input, so it shows in neither ps nor the shell's history"
    )
  ),
  marketingMessages: marketingMessagesOption.pipe(Options.withDefault("off" as const))
}, (options) =>
  Effect.gen(function*() {
    const accessToken = yield* accessTokenOf(options)
    const organization = yield* requireOrganization(options.org)
    const repo = yield* InstancesRepo
    const row = yield* repo.createInstance({
      organizationId: organization.id,
      name: options.name,
      phoneNumberId: options.phoneNumberId,
      wabaId: options.wabaId,
      accessToken,
      marketingMessages: options.marketingMessages
    }).pipe(Effect.mapError((e) => new CliError({ message: e.message })))
    yield* printWith(InstanceRecord)(instanceRecord(row, sendRateOf(undefined, (yield* HubConfig).sendRateCap)))
  })).pipe(
    Command.withDescription("Create an instance bound to one phone number of a business account; prints the instance")
  )

const instanceUpdate = Command.make("update", {
  instance: Args.text({ name: "instance-id" }).pipe(Args.withDescription("The instance to change")),
  marketingMessages: marketingMessagesOption
}, (options) =>
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const row = yield* repo.updateInstance(options.instance, { marketingMessages: options.marketingMessages })
    if (Option.isNone(row)) return yield* new CliError({ message: `instance ${options.instance} was not found` })
    yield* printInstance(organizationInstance(
      row.value,
      sendRateOf(
        (yield* Effect.orDie((yield* ThroughputRepo).levels)).get(row.value.phone_number_id),
        (yield* HubConfig).sendRateCap
      )
    ))
  })).pipe(
    Command.withDescription("Change an instance's settings (--marketing-messages auto|off); prints the instance")
  )

export const instancesCommand = Command.make("instance").pipe(
  Command.withDescription("Instances: each is bound to one business phone number"),
  Command.withSubcommands([instanceCreate, instanceUpdate, instanceList]),
  Command.provide(InstancesWithLevelsOnDatabase)
)

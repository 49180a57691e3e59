/**
 * The `hub` command line: `serve` runs the gateway; `org`, `instance`, `session`, `token` and
 * `events` are operator commands that print JSON on stdout. Every failure, an argument error
 * included, is one JSON line `{"error": "..."}` on stderr and exit status 1; a bad configuration is
 * one such line per bad variable.
 */
import { Args, Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Cause, ConfigError, Console, Data, Duration, Effect, Layer, Option } from "effect"
import { text } from "node:stream/consumers"
import packageJson from "../package.json" with { type: "json" }
import { type ApiTokenRow, TokensRepo } from "./Auth/Repo.js"
import { TokenResolver } from "./Auth/TokenResolver.js"
import { bootstrapSandbox, printDemoCredentials, printDocsLine, printNewTokensHint } from "./Bootstrap.js"
import { HubConfig, HubConfigLive, parseDuration } from "./Config.js"
import { loggingLayer } from "./Logging.js"
import { hubLayer, ServerLive, ServicesLive } from "./Http.js"
import { UnroutedRepo } from "./Ingress/Unrouted.js"
import { ShutdownDelayLive, StopSignalsLive } from "./Health/Readiness.js"
import { InstancesRepo, marketingMessagesModes } from "./Instances/Repo.js"
import { classifyAddress } from "./Net/AddressRanges.js"
import { migrateData } from "./Sql/MigrateData.js"
import { Metrics } from "./Metrics/Metrics.js"

class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const requireOrganization = (id: string) =>
  Effect.flatMap(InstancesRepo, (repo) => repo.findOrganization(id)).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new CliError({ message: `organization ${id} was not found` })),
      onSome: Effect.succeed
    }))
  )

const nonEmpty = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((value) =>
      value.trim() === ""
        ? Effect.fail(ValidationError.invalidValue({ _tag: "Paragraph", value: { _tag: "Text", value: `--${name} must not be empty` } }))
        : Effect.succeed(value.trim())
    )
  )

const graphId = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((value) =>
      /^\d{1,32}$/.test(value)
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue({ _tag: "Paragraph", value: { _tag: "Text", value: `--${name} must be a numeric Graph id` } }))
    )
  )

/** What operator commands stand on: the hub's services, keeping no metrics. */
const OperatorServicesLive = ServicesLive.pipe(Layer.provide(Metrics.Off))

const orgOption = Options.text("org").pipe(Options.withDescription("The organization's id (org_…; see `hub org list`)"))

/** The advisory lock the sandbox's demo is created under (any number unlike the hub's others). */
const DEMO_LOCK = 0x6875_6202

/**
 * The start banner, after the socket is bound but before the hub serves (and logs "Listening on"):
 * in the sandbox, the demo tenancy created on an empty database with its tokens (so a request sent
 * on seeing "Listening on" finds it), or on a restart how to get new tokens; then where the API docs
 * are. Every address names the port actually bound (PORT=0 picks a free one).
 */
const BannerLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const baseUrl = baseUrlOf((yield* HttpServer.HttpServer).address)
    const sql = yield* SqlClient.SqlClient
    // Replicas starting together on an empty PostgreSQL database: one creates the demo, the others
    // wait for its commit under the lock, then find it and create nothing.
    const start = yield* sql.onDialectOrElse({
      pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(${DEMO_LOCK})`, bootstrapSandbox)),
      orElse: () => bootstrapSandbox
    }).pipe(Effect.orDie)
    if (start._tag === "Created") yield* printDemoCredentials(start.demo, baseUrl, (yield* HubConfig).databaseFile)
    if (start._tag === "Existing") yield* printNewTokensHint(start.organizationId)
    yield* printDocsLine(baseUrl)
  })
)

const baseUrlOf = (address: HttpServer.Address) =>
  address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `unix://${address.path}`

/**
 * In sandbox mode without HUB_APP_SECRET the upstream's posts are taken unsigned (the sandbox's own
 * events do not pass through HTTP, so nothing needs them signed): fine on a loopback address, a hole
 * where others can reach the hub, so the operator is told at start.
 */
const UnsignedIngressWarningLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const config = yield* HubConfig
    const loopback = config.host === "localhost" || classifyAddress(config.host) === "loopback"
    if (config.upstream === "sandbox" && Option.isNone(config.appSecret) && !loopback) {
      yield* Effect.logWarning(
        `HUB_APP_SECRET is unset: POST /upstream/events accepts unsigned posts from anyone who can reach HOST=${config.host}; ` +
          "set HUB_APP_SECRET, or listen on a loopback address"
      )
    }
  })
)

const serve = Command.make("serve", {}, () =>
  Layer.launch(Layer.merge(
    UnsignedIngressWarningLive,
    // The stop signals are heard first (the hub turns not ready); the shutdown delay is released first, while the hub still serves.
    ShutdownDelayLive.pipe(Layer.merge(StopSignalsLive), Layer.provide(hubLayer(Layer.provideMerge(BannerLive, ServerLive))))
  ))).pipe(
  Command.withDescription(
    "Run the hub's HTTP server on HOST:PORT (settings from the environment: see the README). In sandbox mode an empty " +
      "database gets a demo organization, instance and tokens, printed once."
  )
)

const organizationRecord = (org: { readonly id: string; readonly name: string; readonly created_at: string }) => ({
  id: org.id,
  name: org.name,
  created_at: org.created_at
})

const orgCreate = Command.make("create", { name: nonEmpty("name", "The organization's name") }, ({ name }) =>
  Effect.flatMap(InstancesRepo, (repo) => repo.createOrganization(name)).pipe(
    Effect.flatMap((org) => printJson(organizationRecord(org)))
  )).pipe(Command.withDescription("Create an organization; prints {id, name, created_at}"))

const orgList = Command.make("list", {}, () =>
  Effect.flatMap(InstancesRepo, (repo) => repo.listOrganizations).pipe(
    Effect.flatMap((orgs) => printJson({ data: orgs.map(organizationRecord) }))
  )).pipe(Command.withDescription("List every organization, oldest first; prints {data: [{id, name, created_at}]}"))

const instanceRecord = (row: {
  readonly id: string
  readonly organization_id: string
  readonly name: string
  readonly phone_number_id: string
  readonly waba_id: string
  readonly marketing_messages: string
  readonly created_at: string
}) => ({
  id: row.id,
  organization_id: row.organization_id,
  name: row.name,
  phone_number_id: row.phone_number_id,
  waba_id: row.waba_id,
  marketing_messages: row.marketing_messages,
  created_at: row.created_at
})

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
    const rows = yield* Option.match(org, {
      onNone: () => repo.listInstances,
      onSome: (id) => Effect.flatMap(requireOrganization(id), (organization) => repo.listByOrganization(organization.id))
    })
    yield* printJson({ data: rows.map(instanceRecord) })
  })).pipe(Command.withDescription(
    "List instances (of one organization with --org), oldest first; prints {data: [{id, organization_id, name, phone_number_id, waba_id, created_at}]}"
  ))

/** The access token given with --access-token, or read (trimmed) from standard input with --access-token-stdin. */
const accessTokenOf = (options: { readonly accessToken: Option.Option<string>; readonly accessTokenStdin: boolean }) => {
  if (!options.accessTokenStdin) return Effect.succeed(options.accessToken)
  if (Option.isSome(options.accessToken)) {
    return Effect.fail(new CliError({ message: "give the access token with --access-token or --access-token-stdin, not both" }))
  }
  return Effect.promise(() => text(process.stdin)).pipe(
    Effect.map((input) => input.trim()),
    Effect.filterOrFail((token) => token !== "", () => new CliError({ message: "--access-token-stdin read no access token from standard input" })),
    Effect.map(Option.some)
  )
}

const instanceCreate = Command.make("create", {
  org: orgOption,
  name: nonEmpty("name", "The instance's name"),
  phoneNumberId: graphId("phone-number-id", "The upstream's phone number id (digits) the instance sends from"),
  wabaId: graphId("waba-id", "The upstream's business account id (digits) the number belongs to"),
  accessToken: Options.optional(Options.text("access-token").pipe(
    Options.withDescription("The upstream access token for this number (stored encrypted); the sandbox needs none")
  )),
  accessTokenStdin: Options.boolean("access-token-stdin").pipe(
    Options.withDescription("Read the access token from standard input, so it shows in neither ps nor the shell's history")
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
    const { organization_id: _, ...printed } = instanceRecord(row)
    yield* printJson(printed)
  })).pipe(Command.withDescription("Create an instance bound to one phone number of a business account; prints the instance"))

const instanceUpdate = Command.make("update", {
  instance: Args.text({ name: "instance-id" }).pipe(Args.withDescription("The instance to change")),
  marketingMessages: marketingMessagesOption
}, (options) =>
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const row = yield* repo.updateInstance(options.instance, { marketingMessages: options.marketingMessages })
    if (Option.isNone(row)) return yield* new CliError({ message: `instance ${options.instance} was not found` })
    yield* printJson(instanceRecord(row.value))
  })).pipe(Command.withDescription("Change an instance's settings (--marketing-messages auto|off); prints the instance"))

const sessionCreate = Command.make("create", {
  org: orgOption,
  ttl: Options.optional(Options.text("ttl").pipe(Options.withDescription("How long the session lasts, such as 30m, 12h or 7d (default HUB_SESSION_TTL, 12h)")))
}, (options) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const ttl = Option.match(options.ttl, { onNone: () => Option.some(config.sessionTtl), onSome: parseDuration })
    if (Option.isNone(ttl) || Duration.toMillis(ttl.value) <= 0) {
      return yield* new CliError({ message: "--ttl must be a positive duration such as 30m, 12h or 7d" })
    }
    const organization = yield* requireOrganization(options.org)
    const session = yield* Effect.flatMap(TokensRepo, (repo) => repo.createSession(organization.id, Duration.toMillis(ttl.value)))
    yield* printJson({ token: session.secret, expires_at: session.expiresAt })
  })).pipe(Command.withDescription(
    "Create a session token for an organization (it manages api tokens: POST /api/auth/api-tokens); prints {token, expires_at}"
  ))

const sessionRevoke = Command.make("revoke", { org: orgOption }, (options) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(options.org)
    // Committed with the revocation feed's rows: every serving hub on this database drops them within about 1 s.
    const hashes = yield* Effect.flatMap(TokensRepo, (repo) => repo.revokeOrganizationSessions(organization.id))
    yield* printJson({ revoked: hashes.length })
  })).pipe(Command.withDescription("Revoke every live session of an organization"))

const tokenCreate = Command.make("create", {
  org: orgOption,
  instance: Options.optional(Options.text("instance").pipe(Options.withDescription("Makes it an instance token for this instance (ins_…)"))),
  name: nonEmpty("name", "The token's name")
}, (options) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(options.org)
    const instances = yield* InstancesRepo
    const instance = yield* Option.match(options.instance, {
      onNone: () => Effect.succeedNone,
      onSome: (id) =>
        instances.findById(id).pipe(
          Effect.map(Option.filter((row) => row.organization_id === organization.id)),
          Effect.flatMap(Option.match({
            onNone: () => Effect.fail(new CliError({ message: `instance ${id} was not found in organization ${organization.id}` })),
            onSome: Effect.succeedSome
          }))
        )
    })
    const { row, secret } = yield* Effect.flatMap(TokensRepo, (repo) =>
      repo.createApiToken({
        organizationId: organization.id,
        instanceId: Option.getOrUndefined(Option.map(instance, (i) => i.id)),
        name: options.name
      }))
    yield* printJson({
      id: row.id,
      name: row.name,
      token: secret,
      ...(row.instance_id === null ? {} : { instance_id: row.instance_id }),
      created_at: row.created_at
    })
  })).pipe(Command.withDescription("Create an api token (an organization token, or an instance token with --instance); prints it with its secret, shown only now"))

/** A token as `GET /api/auth/api-tokens` lists it: never its secret. */
const tokenRecord = (row: ApiTokenRow) => ({
  id: row.id,
  name: row.name,
  kind: row.instance_id === null ? "organization" : "instance",
  ...(row.instance_id === null ? {} : { instance_id: row.instance_id }),
  token_hint: row.token_hint,
  created_at: row.created_at,
  last_used_at: row.last_used_at
})

const tokenList = Command.make("list", { org: orgOption }, ({ org }) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(org)
    const rows = yield* Effect.flatMap(TokensRepo, (repo) => repo.listApiTokens(organization.id))
    yield* printJson({ data: rows.map(tokenRecord) })
  })).pipe(Command.withDescription("List an organization's live api tokens, newest first, without secrets; prints {data: [...]}"))

const tokenRevoke = Command.make("revoke", {
  id: Args.text({ name: "id" }).pipe(Args.withDescription("The api token's id (tok_…; see `hub token list`)"))
}, ({ id }) =>
  Effect.gen(function*() {
    const tokens = yield* TokensRepo
    const token = yield* tokens.findApiToken(id)
    if (Option.isNone(token)) return yield* new CliError({ message: `api token ${id} was not found (or is already revoked)` })
    const revoked = yield* tokens.revokeApiToken(token.value.organization_id, id)
    // As DELETE /api/auth/api-tokens does; a running hub drops the token from its cache within a minute.
    if (Option.isSome(revoked)) yield* Effect.flatMap(TokenResolver, (resolver) => resolver.forget(revoked.value))
    yield* printJson({ id, organization_id: token.value.organization_id, revoked: true })
  })).pipe(Command.withDescription("Revoke an api token: it is refused from then on; prints {id, organization_id, revoked}"))

const eventsUnrouted = Command.make("unrouted", {
  limit: Options.integer("limit").pipe(Options.withDefault(100), Options.withDescription("At most this many, from 1 to 10000"))
}, ({ limit }) =>
  Effect.gen(function*() {
    if (limit < 1 || limit > 10_000) return yield* new CliError({ message: "--limit must be a whole number from 1 to 10000" })
    const changes = yield* Effect.flatMap(UnroutedRepo, (repo) => repo.list(limit))
    yield* printJson({ data: changes })
  })).pipe(Command.withDescription("Upstream changes for phone numbers no instance is bound to, newest first"))

/**
 * The target URL with its password: the URL's own, or (so that it stays out of `ps` and the shell's
 * history) the one read from standard input with --password-stdin, or PGPASSWORD as libpq reads it.
 */
const targetWithPassword = (options: { readonly to: string; readonly passwordStdin: boolean }) =>
  Effect.gen(function*() {
    if (!URL.canParse(options.to)) return yield* new CliError({ message: "--to must be a postgres://user@host:port/database URL" })
    const url = new URL(options.to)
    const fromStdin = options.passwordStdin
      ? yield* Effect.promise(() => text(process.stdin)).pipe(Effect.map((input) => input.trim()))
      : undefined
    if (fromStdin === "") return yield* new CliError({ message: "--password-stdin read no password from standard input" })
    if (fromStdin !== undefined && url.password !== "") {
      return yield* new CliError({ message: "give the password in --to or with --password-stdin, not both" })
    }
    const fromEnvironment = process.env.PGPASSWORD?.trim()
    const password = fromStdin ?? (url.password === "" && fromEnvironment !== undefined && fromEnvironment !== "" ? fromEnvironment : undefined)
    if (password !== undefined) url.password = password
    return url.toString()
  })

const migrateDataCommand = Command.make("migrate-data", {
  from: Options.text("from").pipe(Options.withDescription("the SQLite database file of the hub to move")),
  to: Options.text("to").pipe(Options.withDescription(
    "postgres://user@host:port/database: a database no hub has used (its password from --password-stdin or PGPASSWORD; in the URL it shows in `ps`)"
  )),
  passwordStdin: Options.boolean("password-stdin").pipe(Options.withDescription("Read the PostgreSQL password from standard input"))
}, (options) =>
  targetWithPassword(options).pipe(
    Effect.flatMap((to) => migrateData({ from: options.from, to })),
    Effect.catchAllDefect((defect) => Effect.fail(new CliError({ message: `migrate-data failed, nothing was kept: ${String(defect)}` }))),
    Effect.mapError((e) => new CliError({ message: e.message })),
    Effect.flatMap(printJson)
  )).pipe(Command.withDescription("Copy every table of a SQLite hub into an empty PostgreSQL database"))

const hub = Command.make("hub").pipe(
  Command.withDescription("Messaging Hub: an HTTP gateway in front of the WhatsApp Business Cloud API"),
  Command.withSubcommands([
    serve,
    // Operator commands need the database but not the server.
    Command.make("org").pipe(
      Command.withDescription("Organizations: each owns instances and api tokens"),
      Command.withSubcommands([orgCreate, orgList]),
      Command.provide(OperatorServicesLive)
    ),
    Command.make("instance").pipe(
      Command.withDescription("Instances: each is bound to one business phone number"),
      Command.withSubcommands([instanceCreate, instanceUpdate, instanceList]),
      Command.provide(OperatorServicesLive)
    ),
    Command.make("session").pipe(
      Command.withDescription("Session tokens, which manage an organization's api tokens"),
      Command.withSubcommands([sessionCreate, sessionRevoke]),
      Command.provide(OperatorServicesLive)
    ),
    Command.make("token").pipe(
      Command.withDescription("Api tokens: organization tokens and instance tokens"),
      Command.withSubcommands([tokenCreate, tokenList, tokenRevoke]),
      Command.provide(OperatorServicesLive)
    ),
    Command.make("events").pipe(
      Command.withDescription("Upstream events the hub keeps aside"),
      Command.withSubcommands([eventsUnrouted]),
      Command.provide(OperatorServicesLive)
    ),
    // Opens the two databases it names, not HUB_DB.
    migrateDataCommand
  ])
)

const cli = Command.run(hub, { name: "hub", version: packageJson.version })

const isServe = process.argv.slice(2)[0] === "serve"

if (isServe) {
  // A library's stray promise rejection (seen from @effect/platform-bun's multipart reader when a part
  // hits a size limit) must not take every in-flight request down with the process: log it, keep serving.
  process.on("unhandledRejection", (reason) => {
    console.error(JSON.stringify({ message: "Unhandled promise rejection", reason: String(reason) }))
  })
}

/** Terminal styling (help's bold and colours), dropped when the output is not a terminal. */
const ANSI_STYLE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g")
const plain = (text: string) => text.replace(ANSI_STYLE, "")

/**
 * The command line's console: help and output as @effect/cli writes them, without styling when
 * stdout is not a terminal; its own error printing is dropped, because reportFailure prints every
 * failure, argument errors included, as one JSON line.
 */
const withCliConsole = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((base) =>
    Effect.withConsole(effect, {
      ...base,
      log: (...args) => base.log(...(process.stdout.isTTY === true ? args : args.map((arg) => (typeof arg === "string" ? plain(arg) : arg)))),
      error: () => Effect.void
    })
  )

const printError = (message: string) => Effect.sync(() => process.stderr.write(`${JSON.stringify({ error: message })}\n`))

/** One message per bad variable of a configuration error. */
const configProblems = (error: ConfigError.ConfigError): ReadonlyArray<string> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configProblems(error.left), ...configProblems(error.right)]
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported": {
      const name = error.path.join("_")
      return [error.message.includes(name) ? error.message : `${name}: ${error.message}`]
    }
  }
}

/** An argument error's message on one line, as @effect/cli words it. */
const argumentProblem = (error: ValidationError.ValidationError) =>
  plain(HelpDoc.toAnsiText(error.error)).split("\n").map((line) => line.trim()).filter((line) => line !== "").join(" ")

const reportFailure = (error: unknown) =>
  Effect.gen(function*() {
    if (ValidationError.isValidationError(error)) return yield* printError(argumentProblem(error))
    if (ConfigError.isConfigError(error)) {
      for (const problem of new Set(configProblems(error))) yield* printError(`Configuration error: ${problem}`)
      return
    }
    yield* printError(error instanceof CliError ? error.message : String(error))
  }).pipe(Effect.zipRight(Effect.sync(() => process.exit(1))))

/** A port already taken: the one defect an operator causes, said in one line. */
const portInUse = (defect: unknown) =>
  typeof defect === "object" && defect !== null && "code" in defect && defect.code === "EADDRINUSE"

const reportDefect = (cause: Cause.Cause<unknown>) =>
  Effect.gen(function*() {
    const defect = Cause.squash(cause)
    if (portInUse(defect)) {
      const where = `${process.env.HOST ?? "127.0.0.1"}:${process.env.PORT ?? "3000"}`
      return yield* printError(`${where} is already in use: stop whatever listens there, or set PORT (or HOST) to a free one`)
    }
    yield* printError(`Unexpected failure: ${defect instanceof Error ? defect.message : String(defect)}`)
  })

cli(process.argv).pipe(
  // Logs go to stdout for `serve`; operator commands keep stdout for their JSON and log only warnings.
  Effect.provide(Layer.provideMerge(loggingLayer(!isServe), HubConfigLive)),
  withCliConsole,
  Effect.provide(BunContext.layer),
  Effect.catchAll(reportFailure),
  Effect.catchAllCause((cause) => Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(reportDefect(cause), Effect.sync(() => process.exit(1)))),
  BunRuntime.runMain({ disablePrettyLogger: true })
)

/**
 * The `hub` command line: `serve` runs the gateway; `org`, `instance`, `session` and `token`
 * are operator commands that print JSON on stdout (errors go to stderr with a non-zero exit).
 */
import { Command, Options, ValidationError } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { ConfigError, Console, Data, Duration, Effect, Layer, Option } from "effect"
import { TokensRepo } from "./Auth/Repo.js"
import { bootstrapSandbox, printDemoCredentials } from "./Bootstrap.js"
import { HubConfig, HubConfigLive, parseDuration } from "./Config.js"
import { loggingLayer } from "./Logging.js"
import { hubLayer, ServerLive, ServicesLive } from "./Http.js"
import { UnroutedRepo } from "./Events/Unrouted.js"
import { ReadinessLive, ShutdownDelayLive } from "./Health/Readiness.js"
import { InstancesRepo } from "./Instances/Repo.js"
import { migrateData } from "./Sql/MigrateData.js"

class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

const requireOrganization = (id: string) =>
  Effect.flatMap(InstancesRepo, (repo) => repo.findOrganization(id)).pipe(
    Effect.flatMap(Option.match({
      onNone: () => Effect.fail(new CliError({ message: `organization ${id} was not found` })),
      onSome: Effect.succeed
    }))
  )

const nonEmpty = (name: string) =>
  Options.text(name).pipe(
    Options.mapEffect((value) =>
      value.trim() === ""
        ? Effect.fail(ValidationError.invalidValue({ _tag: "Paragraph", value: { _tag: "Text", value: `--${name} must not be empty` } }))
        : Effect.succeed(value.trim())
    )
  )

const graphId = (name: string) =>
  Options.text(name).pipe(
    Options.mapEffect((value) =>
      /^\d{1,32}$/.test(value)
        ? Effect.succeed(value)
        : Effect.fail(ValidationError.invalidValue({ _tag: "Paragraph", value: { _tag: "Text", value: `--${name} must be a numeric Graph id` } }))
    )
  )

/** The advisory lock the sandbox's demo is created under (any number unlike the hub's others). */
const DEMO_LOCK = 0x6875_6202

/**
 * Creates the demo tenancy and prints its tokens after the socket is bound but before the hub serves
 * (and logs "Listening on"), so a request sent on seeing that line finds the tenancy, and the curl line
 * names the port actually bound (PORT=0 picks a free one).
 */
const DemoLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const sql = yield* SqlClient.SqlClient
    // Replicas starting together on an empty PostgreSQL database: one creates the demo, the others
    // wait for its commit under the lock, then find it and create nothing.
    const demo = yield* sql.onDialectOrElse({
      pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(${DEMO_LOCK})`, bootstrapSandbox)),
      orElse: () => bootstrapSandbox
    }).pipe(Effect.orDie)
    if (Option.isSome(demo)) yield* printDemoCredentials(demo.value, baseUrlOf(server.address))
  })
)

const baseUrlOf = (address: HttpServer.Address) =>
  address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `unix://${address.path}`

const serve = Command.make("serve", {}, () =>
  Layer.launch(
    // Readiness first (it hears the signal), the shutdown delay last (released first, while the hub still serves).
    ShutdownDelayLive.pipe(Layer.provide(hubLayer(Layer.provideMerge(DemoLive, ServerLive))), Layer.provide(ReadinessLive))
  )).pipe(
  Command.withDescription("Run the hub's HTTP server")
)

const orgCreate = Command.make("create", { name: nonEmpty("name") }, ({ name }) =>
  Effect.flatMap(InstancesRepo, (repo) => repo.createOrganization(name)).pipe(
    Effect.flatMap((org) => printJson({ id: org.id, name: org.name, created_at: org.created_at }))
  ))

const instanceCreate = Command.make("create", {
  org: Options.text("org"),
  name: nonEmpty("name"),
  phoneNumberId: graphId("phone-number-id"),
  wabaId: graphId("waba-id"),
  accessToken: Options.optional(Options.text("access-token"))
}, (options) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(options.org)
    const repo = yield* InstancesRepo
    const row = yield* repo.createInstance({
      organizationId: organization.id,
      name: options.name,
      phoneNumberId: options.phoneNumberId,
      wabaId: options.wabaId,
      accessToken: options.accessToken
    }).pipe(Effect.mapError((e) => new CliError({ message: e.message })))
    yield* printJson({ id: row.id, name: row.name, phone_number_id: row.phone_number_id, waba_id: row.waba_id, created_at: row.created_at })
  }))

const sessionCreate = Command.make("create", {
  org: Options.text("org"),
  ttl: Options.optional(Options.text("ttl"))
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
  }))

const tokenCreate = Command.make("create", {
  org: Options.text("org"),
  instance: Options.optional(Options.text("instance")),
  name: nonEmpty("name")
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
  }))

const eventsUnrouted = Command.make("unrouted", {
  limit: Options.integer("limit").pipe(Options.withDefault(100))
}, ({ limit }) =>
  Effect.gen(function*() {
    if (limit < 1 || limit > 10_000) return yield* new CliError({ message: "--limit must be a whole number from 1 to 10000" })
    const changes = yield* Effect.flatMap(UnroutedRepo, (repo) => repo.list(limit))
    yield* printJson({ data: changes })
  })).pipe(Command.withDescription("Upstream changes for phone numbers no instance is bound to, newest first"))

const migrateDataCommand = Command.make("migrate-data", {
  from: Options.text("from").pipe(Options.withDescription("the SQLite database file of the hub to move")),
  to: Options.text("to").pipe(Options.withDescription("postgres://user:password@host:port/database: a database no hub has used"))
}, (options) =>
  migrateData(options).pipe(
    Effect.catchAllDefect((defect) => Effect.fail(new CliError({ message: `migrate-data failed, nothing was kept: ${String(defect)}` }))),
    Effect.mapError((e) => new CliError({ message: e.message })),
    Effect.flatMap(printJson)
  )).pipe(Command.withDescription("Copy every table of a SQLite hub into an empty PostgreSQL database"))

const hub = Command.make("hub").pipe(
  Command.withDescription("Messaging Hub: an HTTP gateway in front of the WhatsApp Business Cloud API"),
  Command.withSubcommands([
    serve,
    // Operator commands need the database but not the server.
    Command.make("org").pipe(Command.withSubcommands([orgCreate]), Command.provide(ServicesLive)),
    Command.make("instance").pipe(Command.withSubcommands([instanceCreate]), Command.provide(ServicesLive)),
    Command.make("session").pipe(Command.withSubcommands([sessionCreate]), Command.provide(ServicesLive)),
    Command.make("token").pipe(Command.withSubcommands([tokenCreate]), Command.provide(ServicesLive)),
    Command.make("events").pipe(Command.withSubcommands([eventsUnrouted]), Command.provide(ServicesLive)),
    // Opens the two databases it names, not HUB_DB.
    migrateDataCommand
  ])
)

const cli = Command.run(hub, { name: "hub", version: "0.1.0" })

const isServe = process.argv.slice(2)[0] === "serve"

if (isServe) {
  // A library's stray promise rejection (seen from @effect/platform-bun's multipart reader when a part
  // hits a size limit) must not take every in-flight request down with the process: log it, keep serving.
  process.on("unhandledRejection", (reason) => {
    console.error(JSON.stringify({ message: "Unhandled promise rejection", reason: String(reason) }))
  })
}

const reportFailure = (error: unknown) =>
  Effect.gen(function*() {
    if (ValidationError.isValidationError(error)) return // @effect/cli has printed it with the usage
    const message = ConfigError.isConfigError(error)
      ? `Configuration error: ${String(error)}`
      : error instanceof CliError
      ? error.message
      : String(error)
    yield* Console.error(JSON.stringify({ error: message }))
  }).pipe(Effect.zipRight(Effect.sync(() => process.exit(1))))

cli(process.argv).pipe(
  // Logs go to stdout for `serve`; operator commands keep stdout for their JSON and log only warnings.
  Effect.provide(Layer.provideMerge(loggingLayer(!isServe), HubConfigLive)),
  Effect.provide(BunContext.layer),
  Effect.catchAll(reportFailure),
  BunRuntime.runMain({ disablePrettyLogger: true })
)

/**
 * The `hub` command line: `serve` runs the gateway; `org`, `instance`, `session`, `token` and
 * `events` are operator commands that print JSON on stdout, each group over only the database and
 * the repositories it uses; `migrate-data` opens the two databases it names. Failures are reported
 * as Report.ts says.
 */
import { Command } from "@effect/cli"
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Effect, Layer } from "effect"
import packageJson from "../../package.json" with { type: "json" }
import { HubConfigLive } from "../Config.js"
import { loggingLayer } from "../Logging.js"
import { eventsCommand } from "./Events.js"
import { instancesCommand } from "./Instances.js"
import { migrateDataCommand } from "./MigrateData.js"
import { organizationsCommand } from "./Organizations.js"
import { reportCause, reportFailure, withCliConsole } from "./Report.js"
import { serveCommand } from "./Serve.js"
import { sessionsCommand } from "./Sessions.js"
import { tokensCommand } from "./Tokens.js"

const hub = Command.make("hub").pipe(
  Command.withDescription("Messaging Hub: an HTTP gateway in front of the WhatsApp Business Cloud API"),
  Command.withSubcommands([
    serveCommand,
    organizationsCommand,
    instancesCommand,
    sessionsCommand,
    tokensCommand,
    eventsCommand,
    migrateDataCommand
  ])
)

const cli = Command.run(hub, { name: "hub", version: packageJson.version })

/** Runs the command `argv` names (process.argv: the runtime, the script, then the command) until it ends. */
export const runHub = (argv: ReadonlyArray<string>) => {
  const serving = argv[2] === "serve"
  if (serving) {
    // A library's stray promise rejection (seen from @effect/platform-bun's multipart reader when a part
    // hits a size limit) must not take every in-flight request down with the process: log it, keep serving.
    process.on("unhandledRejection", (reason) => {
      console.error(JSON.stringify({ message: "Unhandled promise rejection", reason: String(reason) }))
    })
  }
  cli(argv).pipe(
    // Logs go to stdout for `serve`; operator commands keep stdout for their JSON and log only warnings.
    Effect.provide(Layer.provideMerge(loggingLayer(!serving), HubConfigLive)),
    withCliConsole,
    Effect.provide(BunContext.layer),
    Effect.catchAll(reportFailure),
    Effect.catchAllCause(reportCause),
    BunRuntime.runMain({ disablePrettyLogger: true })
  )
}

/** `hub serve`: the gateway on HOST:PORT, with the start banner (the sandbox's demo tenancy, where the docs are). */
import { Command } from "@effect/cli"
import { HttpServer } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, Option } from "effect"
import { HubConfig } from "../Config.js"
import { ShutdownDelayLive, StopSignalsLive } from "../Health/Readiness.js"
import { hubLayer, ServerLive } from "../Http.js"
import { classifyAddress } from "../Net/AddressRanges.js"
import { HostResolver } from "../Net/UrlPolicy.js"
import { bootstrapSandbox, printDemoCredentials, printDocsLine, printNewTokensHint } from "./Bootstrap.js"

/** The advisory lock the sandbox's demo is created under (any number unlike the hub's others). */
const DEMO_LOCK = 0x6875_6202

const baseUrlOf = (address: HttpServer.Address) =>
  address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `unix://${address.path}`

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

export const serveCommand = Command.make("serve", {}, () =>
  Layer.launch(Layer.merge(
    UnsignedIngressWarningLive,
    // The stop signals are heard first (the hub turns not ready); the shutdown delay is released first, while the hub still serves.
    ShutdownDelayLive.pipe(
      Layer.merge(StopSignalsLive),
      Layer.provide(hubLayer(Layer.provideMerge(BannerLive, ServerLive))),
      Layer.provide(HostResolver.System)
    )
  ))).pipe(
    Command.withDescription(
      "Run the hub's HTTP server on HOST:PORT (settings from the environment: see the README). In sandbox mode an empty " +
        "database gets a demo organization, instance and tokens, printed once."
    )
  )

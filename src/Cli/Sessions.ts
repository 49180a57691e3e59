/** `hub session`: session tokens, which manage an organization's api tokens. */
import { Command, Options } from "@effect/cli"
import { Duration, Effect, Option, Schema } from "effect"
import { TokensRepo } from "../ApiTokens/Repo.js"
import { HubConfig, parseDuration } from "../Config.js"
import { IsoTimestamp } from "../Domain/Schemas.js"
import { TokensOnDatabase } from "./Database.js"
import { orgOption } from "./Options.js"
import { requireOrganization } from "./Organizations.js"
import { printWith } from "./Output.js"
import { CliError } from "./Report.js"

/** A new session, its secret shown only now (the HTTP API creates none). */
const SessionCreated = Schema.Struct({ token: Schema.String, expires_at: IsoTimestamp })

const SessionsRevoked = Schema.Struct({ revoked: Schema.Number })

const sessionCreate = Command.make("create", {
  org: orgOption,
  ttl: Options.optional(
    Options.text("ttl").pipe(
      Options.withDescription("How long the session lasts, such as 30m, 12h or 7d (default HUB_SESSION_TTL, 12h)")
    )
  )
}, (options) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const ttl = Option.match(options.ttl, { onNone: () => Option.some(config.sessionTtl), onSome: parseDuration })
    if (Option.isNone(ttl) || Duration.toMillis(ttl.value) <= 0) {
      return yield* new CliError({ message: "--ttl must be a positive duration such as 30m, 12h or 7d" })
    }
    const organization = yield* requireOrganization(options.org)
    const session = yield* Effect.flatMap(TokensRepo, (repo) =>
      repo.createSession(organization.id, Duration.toMillis(ttl.value)))
    yield* printWith(SessionCreated)({ token: session.secret, expires_at: session.expiresAt })
  })).pipe(Command.withDescription(
    "Create a session token for an organization (it manages api tokens: POST /api/auth/api-tokens); prints {token, expires_at}"
  ))

const sessionRevoke = Command.make("revoke", { org: orgOption }, (options) =>
  Effect.gen(function*() {
    const organization = yield* requireOrganization(options.org)
    // Committed with the revocation feed's rows: every serving hub on this database drops them within about 1 s.
    const hashes = yield* Effect.flatMap(TokensRepo, (repo) => repo.revokeOrganizationSessions(organization.id))
    yield* printWith(SessionsRevoked)({ revoked: hashes.length })
  })).pipe(Command.withDescription("Revoke every live session of an organization"))

export const sessionsCommand = Command.make("session").pipe(
  Command.withDescription("Session tokens, which manage an organization's api tokens"),
  Command.withSubcommands([sessionCreate, sessionRevoke]),
  Command.provide(TokensOnDatabase)
)

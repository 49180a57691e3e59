import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { ServiceUnavailable } from "../Domain/Errors.js"
import { Readiness } from "./Readiness.js"

export const HealthHttpLive = HttpApiBuilder.group(HubApi, "health", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const readiness = yield* Readiness
    const ok = { status: "ok" } as const
    return handlers
      .handle("health", () => Effect.succeed(ok))
      .handle("ready", () =>
        readiness.draining()
          ? Effect.fail(
            new ServiceUnavailable({
              message: "The hub is stopping (draining); send requests to another replica",
              error: "draining"
            })
          )
          : sql`SELECT 1 AS one`.pipe(
            Effect.as({ status: "ready", database: "ok" } as const),
            Effect.timeoutFail({ duration: "2 seconds", onTimeout: () => "timeout" }),
            Effect.mapError(() =>
              new ServiceUnavailable({ message: "The database is not reachable", error: "not_ready" })
            )
          ))
  }))

import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Duration, Effect } from "effect"
import { HubApi } from "../Api.js"
import { ServiceUnavailable, storageUnavailable } from "../Domain/Errors.js"
import { WriteBatcher } from "../Sql/WriteBatcher.js"
import { Readiness } from "./Readiness.js"

/** How long the database answering must wait, at most: past it the replica is not ready (a load balancer's probe has its own bound). */
const PROBE_TIMEOUT = Duration.seconds(2)

/**
 * Not ready for this long after a write failed because of the database (full, read-only, gone):
 * it may answer reads while it refuses writes. Ready again once writes stop failing for this long.
 */
const WRITE_FAILURE_WINDOW_MS = 5_000

export const HealthHttpLive = HttpApiBuilder.group(HubApi, "health", (handlers) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batcher = yield* WriteBatcher
    const readiness = yield* Readiness
    const ok = { status: "ok" } as const
    const probe = sql`SELECT 1 AS one`.pipe(
      Effect.as({ status: "ready", database: "ok" } as const),
      Effect.timeoutFail({ duration: PROBE_TIMEOUT, onTimeout: () => "timeout" }),
      Effect.mapError(() => new ServiceUnavailable({ message: "The database is not reachable", error: "not_ready" }))
    )
    return handlers
      .handle("health", () => Effect.succeed(ok))
      .handle("ready", () => {
        if (readiness.draining()) {
          return Effect.fail(
            new ServiceUnavailable({
              message: "The hub is stopping (draining); send requests to another replica",
              error: "draining"
            })
          )
        }
        return Date.now() - batcher.lastStorageFailureAt() < WRITE_FAILURE_WINDOW_MS
          ? Effect.fail(storageUnavailable("The database refuses writes (full, read-only or gone)"))
          : probe
      })
  }))

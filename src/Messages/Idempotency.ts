/**
 * Idempotency-Key answers of sends, scoped per instance (the sending number) and kept 24 hours
 * (Sql/IdempotencyKeys.ts, the mechanism webhook test events use too). The first request with
 * a key claims it (a row without answer); the answer is stored when it is final, and a repeat with the
 * same body gets that answer again without sending. A different body, or a repeat while the first is
 * still running, is a 409.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { createHash } from "node:crypto"
import { Conflict, type ServiceUnavailable, storageUnavailable } from "../Domain/Errors.js"
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"
import { runForFleet } from "../Sql/FleetJobs.js"
import { type KeyKind, keysOf } from "../Sql/IdempotencyKeys.js"

const IDEMPOTENCY_TTL = Duration.hours(24)

const SendKeyHeld = Schema.Struct({
  organization_id: Schema.String,
  request_hash: Schema.String,
  /** Both NULL while the first request runs. */
  status_code: Schema.NullOr(Schema.Number),
  response: Schema.NullOr(Schema.String)
})
type SendKeyHeld = typeof SendKeyHeld.Type

export interface KeyRef {
  readonly organizationId: OrganizationId
  /** The key's scope: one instance's keys never meet another's. */
  readonly instanceId: InstanceId
  readonly key: string
}

export type Claim =
  | { readonly _tag: "Claimed" }
  /** The stored first answer: status code and JSON body text. */
  | { readonly _tag: "Replay"; readonly statusCode: number; readonly body: string }

/** A send's key: held per instance for 24 hours, with the request's hash and, once final, its answer. */
const sendKeys: KeyKind<SendKeyHeld, typeof SendKeyHeld.Encoded> = {
  table: "idempotency_keys",
  scopeColumn: "instance_id",
  window: IDEMPOTENCY_TTL,
  held: SendKeyHeld,
  columns: ["organization_id", "request_hash", "status_code", "response"]
}

/** JSON with object keys sorted, so the same body hashes the same whatever its key order. */
const canonical = (value: Json): string => {
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonical(item)}`).join(",")}}`
}

/** What makes two requests "the same": the normalised upstream body and the instance it goes from. */
export const requestHash = (instanceId: InstanceId, body: Json): string =>
  createHash("sha256").update(canonical({ instance_id: instanceId, body })).digest("hex")

export class IdempotencyKeys extends Context.Tag("IdempotencyKeys")<IdempotencyKeys, {
  readonly begin: (
    input: KeyRef & { readonly requestHash: string }
  ) => Effect.Effect<Claim, Conflict | ServiceUnavailable>
  /** Stores the final answer of a claimed key (its body as JSON). */
  readonly complete: (ref: KeyRef, statusCode: number, body: unknown) => Effect.Effect<void>
  /** Gives a claimed key up, so a retry with it is processed afresh. */
  readonly release: (ref: KeyRef) => Effect.Effect<void>
}>() {}

export const IdempotencyKeysLive = Layer.scoped(
  IdempotencyKeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keys = keysOf(sql, sendKeys)
    const scoped = (ref: KeyRef) => ({ scope: ref.instanceId, key: ref.key })

    // Expired keys are dropped hourly, by one replica of the fleet; a claim also replaces an expired row for its own key.
    const purge = Effect.suspend(() => keys.purge(new Date())).pipe(
      Effect.catchAll((e) => Effect.logWarning("Could not purge expired idempotency keys", e))
    )
    yield* runForFleet("idempotency-purge", { every: Duration.hours(1), firstAfter: Duration.zero }, purge)

    const claim = (input: KeyRef & { readonly requestHash: string }) =>
      Effect.map(
        keys.claim(scoped(input), {
          organization_id: input.organizationId,
          request_hash: input.requestHash,
          status_code: null,
          response: null
        }, new Date()),
        (claimed) => {
          if (claimed._tag !== "Held") return claimed
          const { held } = claimed
          if (held.request_hash !== input.requestHash) return { _tag: "Mismatch" } as const
          if (held.status_code === null || held.response === null) return { _tag: "Busy" } as const
          return { _tag: "Replay", statusCode: held.status_code, body: held.response } as const
        }
      )

    return IdempotencyKeys.of({
      begin: (input) =>
        claim(input).pipe(
          Effect.catchTag("SqlError", (e) =>
            Effect.zipRight(
              Effect.logError("Could not check an Idempotency-Key", e),
              storageUnavailable("The Idempotency-Key could not be checked; nothing was sent")
            )),
          Effect.flatMap((result): Effect.Effect<Claim, Conflict> => {
            switch (result._tag) {
              case "Claimed":
              case "Replay":
                return Effect.succeed(result)
              case "Mismatch":
                return new Conflict({
                  message:
                    "This Idempotency-Key was already used with a different request; use a new key for a new message",
                  error: "idempotency_key_reused"
                })
              case "Busy":
                return new Conflict({
                  message: "A request with this Idempotency-Key is still being processed; retry once it has answered",
                  error: "idempotency_key_in_flight"
                })
            }
          })
        ),
      complete: (ref, statusCode, body) =>
        keys.update(scoped(ref), { status_code: statusCode, response: JSON.stringify(body) }).pipe(
          Effect.catchAll((e) =>
            Effect.logError(
              "Could not store the answer of an Idempotency-Key; retries with it get 409 until it expires",
              e
            )
          )
        ),
      release: (ref) =>
        keys.release(scoped(ref), sql`status_code IS NULL`).pipe(
          Effect.catchAll((e) =>
            Effect.logError("Could not release an Idempotency-Key; retries with it get 409 until it expires", e)
          )
        )
    })
  })
)

/**
 * Api tokens: created with a session token, listed and revoked by session or organization tokens.
 * A session token can revoke itself.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { accepts, everyToken, management, sessionOnly } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { documented } from "../Domain/Documented.js"
import { Wire } from "../Domain/Errors.js"
import { IdString, IsoTimestamp, Label, RequestStruct } from "../Domain/Schemas.js"
import type { ApiTokenRow } from "./Repo.js"

const CreateApiToken = RequestStruct({
  name: Label(100),
  instance_id: Schema.optional(IdString)
})

export const ApiTokenCreated = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  token: Schema.String.annotations({ description: "The secret; shown only in this response" }),
  instance_id: Schema.optional(Schema.String),
  created_at: IsoTimestamp
})

export const ApiTokenSummary = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  kind: Schema.Literal("organization", "instance"),
  instance_id: Schema.optional(Schema.String),
  token_hint: Schema.String.annotations({ description: "The first characters of the secret" }),
  created_at: IsoTimestamp,
  last_used_at: Schema.NullOr(IsoTimestamp)
})

export const ApiTokenList = Schema.Struct({ data: Schema.Array(ApiTokenSummary) })

export const WhoAmI = Schema.Struct({
  kind: Schema.Literal("session", "organization", "instance").annotations({
    description: "The token's kind, which decides what it may call"
  }),
  organization_id: Schema.String,
  instance_id: Schema.optional(Schema.String).annotations({ description: "An instance token's instance" }),
  phone_number_id: Schema.optional(Schema.String).annotations({ description: "An instance token's phone number id" }),
  token_id: Schema.String.annotations({ description: "The api token's id (tok_…) or the session's" }),
  expires_at: Schema.optional(IsoTimestamp).annotations({
    description: "When a session token stops being valid; api tokens do not expire"
  })
})

/** A new token as its creation answers it, with its secret (shown only then). */
export const apiTokenCreated = (row: ApiTokenRow, secret: string): typeof ApiTokenCreated.Type => ({
  id: row.id,
  name: row.name,
  token: secret,
  ...(row.instance_id === null ? {} : { instance_id: row.instance_id }),
  created_at: row.created_at
})

/** A token as a list shows it: never its secret. */
export const apiTokenSummary = (row: ApiTokenRow): typeof ApiTokenSummary.Type => ({
  id: row.id,
  name: row.name,
  kind: row.instance_id === null ? "organization" : "instance",
  ...(row.instance_id === null ? {} : { instance_id: row.instance_id }),
  token_hint: row.token_hint,
  created_at: row.created_at,
  last_used_at: row.last_used_at
})

export class AuthApi extends HttpApiGroup.make("apiTokens")
  .annotate(
    OpenApi.Description,
    "Api tokens: organization tokens reach every instance of the organization, instance tokens one instance. Created with a session token."
  )
  .add(
    HttpApiEndpoint.post("create", "/api/auth/api-tokens")
      .setPayload(CreateApiToken)
      .addSuccess(ApiTokenCreated, { status: 201 })
      .addError(Wire.NotFound)
      .addError(Wire.PayloadTooLarge)
      .pipe(
        accepts(sessionOnly),
        documented(
          "Create an api token",
          "Creates an organization token, or with `instance_id` an instance token. The secret (`token`) is in this answer only.",
          { example: { name: "ci pipeline" } }
        )
      )
  )
  .add(
    HttpApiEndpoint.get("list", "/api/auth/api-tokens")
      .addSuccess(ApiTokenList)
      .pipe(
        accepts(management),
        documented("List api tokens", "The organization's api tokens without their secrets (a hint of each is shown).")
      )
  )
  .add(
    HttpApiEndpoint.del("revoke", "/api/auth/api-tokens/:tokenId")
      .setPath(Schema.Struct({ tokenId: IdString }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(Wire.NotFound)
      .pipe(accepts(management), documented("Revoke an api token", "The token is refused from the next request on."))
  )
  .add(
    HttpApiEndpoint.get("whoami", "/api/auth/whoami")
      .addSuccess(WhoAmI)
      .pipe(
        accepts(everyToken),
        documented(
          "Who am I",
          "The calling token's kind and scope: its organization, an instance token's instance and number, a session's expiry. " +
            "What a token may call follows from its kind (each operation names the kinds it accepts)."
        )
      )
  )
  .add(
    HttpApiEndpoint.del("revokeSession", "/api/auth/session")
      .addSuccess(HttpApiSchema.NoContent)
      .pipe(
        accepts(sessionOnly),
        documented(
          "Sign out a session",
          "Revokes the session token that calls it; it is refused from the next request on."
        )
      )
  )
  .middleware(Authentication)
{}

/**
 * Api tokens: created with a session token, listed and revoked by session or organization tokens.
 * A session token can revoke itself.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFound } from "../Domain/Errors.js"
import { IdString, IsoTimestamp, Label, RequestStruct } from "../Domain/Schemas.js"
import { Authentication } from "../Domain/Authentication.js"

export const CreateApiToken = RequestStruct({
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

export class AuthApi extends HttpApiGroup.make("apiTokens")
  .add(
    HttpApiEndpoint.post("create", "/api/auth/api-tokens")
      .setPayload(CreateApiToken)
      .addSuccess(ApiTokenCreated, { status: 201 })
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("list", "/api/auth/api-tokens").addSuccess(ApiTokenList))
  .add(
    HttpApiEndpoint.del("revoke", "/api/auth/api-tokens/:tokenId")
      .setPath(Schema.Struct({ tokenId: IdString }))
      .addSuccess(HttpApiSchema.NoContent)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("revokeSession", "/api/auth/session")
      .addSuccess(HttpApiSchema.NoContent)
      .annotate(OpenApi.Description, "Revokes the session token that calls it; it is refused at once")
  )
  .middleware(Authentication)
{}

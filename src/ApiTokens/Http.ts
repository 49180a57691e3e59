import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { HubApi } from "../Api.js"
import { NotFound } from "../Domain/Errors.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { InstancesRepo } from "../Instances/Repo.js"
import { apiTokenCreated, apiTokenSummary } from "./Api.js"
import { TokensRepo } from "./Repo.js"
import { TokenResolver } from "./TokenResolver.js"

export const AuthHttpLive = HttpApiBuilder.group(HubApi, "apiTokens", (handlers) =>
  Effect.gen(function*() {
    const tokens = yield* TokensRepo
    const instances = yield* InstancesRepo
    const resolver = yield* TokenResolver
    return handlers
      .handle("create", ({ payload }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const instance = payload.instance_id === undefined
            ? Option.none()
            : (yield* instances.findById(payload.instance_id)).pipe(
              Option.filter((row) => row.organization_id === principal.organizationId)
            )
          if (payload.instance_id !== undefined && Option.isNone(instance)) {
            return yield* new NotFound({
              message: `instance_id ${payload.instance_id} was not found`,
              error: "not_found"
            })
          }
          const { row, secret } = yield* tokens.createApiToken({
            organizationId: principal.organizationId,
            instanceId: Option.getOrUndefined(Option.map(instance, (i) => i.id)),
            name: payload.name
          })
          return apiTokenCreated(row, secret)
        }))
      .handle("list", () =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(tokens.listApiTokens(principal.organizationId), (rows) => ({ data: rows.map(apiTokenSummary) }))))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const revoked = yield* tokens.revokeApiToken(principal.organizationId, path.tokenId)
          if (Option.isNone(revoked)) {
            return yield* new NotFound({ message: `api token ${path.tokenId} was not found`, error: "not_found" })
          }
          yield* resolver.forget(revoked.value)
        }))
      .handle("whoami", () =>
        Effect.map(CurrentPrincipal, (principal) => ({
          kind: principal.kind,
          organization_id: principal.organizationId,
          ...(principal.instance === undefined
            ? {}
            : { instance_id: principal.instance.id, phone_number_id: principal.instance.phoneNumberId }),
          token_id: principal.credentialId,
          ...(principal.expiresAt === undefined ? {} : { expires_at: new Date(principal.expiresAt).toISOString() })
        })))
      .handle("revokeSession", () =>
        Effect.gen(function*() {
          // The access policy admits session tokens only, so the principal is this session.
          const principal = yield* CurrentPrincipal
          const revoked = yield* tokens.revokeSession(principal.credentialId)
          if (Option.isSome(revoked)) {
            yield* resolver.forget(revoked.value)
          }
        }))
  }))

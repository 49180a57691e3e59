/**
 * Authentication for every protected endpoint: resolves the Bearer token to a Principal (401 when
 * missing, unknown, revoked or expired) and applies the access policy for the matched route (403).
 */
import { HttpApiMiddleware, HttpApiSecurity, HttpRouter, HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Schema } from "effect"
import { Forbidden, Unauthorized } from "../Domain/Errors.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { AccessPolicy, refusal } from "./Access.js"
import { TokenResolver } from "./TokenResolver.js"

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const BEARER = /^Bearer\s+(\S+)\s*$/i

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const resolver = yield* TokenResolver
    return Authentication.of({
      bearer: () =>
        Effect.gen(function*() {
          // The header is read here rather than from the decoded value so the scheme is checked too.
          const request = yield* HttpServerRequest.HttpServerRequest
          const match = BEARER.exec(request.headers.authorization ?? "")
          if (match === null || match[1] === undefined) return yield* new Unauthorized()
          const principal = yield* resolver.resolve(match[1])
          const { route } = yield* HttpRouter.RouteContext
          const allowed = AccessPolicy[`${route.method} ${route.path}`] ?? []
          if (!allowed.includes(principal.kind)) {
            return yield* new Forbidden({ message: refusal(principal.kind, allowed), error: "forbidden_token_kind" })
          }
          return principal
        })
    })
  })
)

/**
 * Authentication for every protected endpoint: resolves the Bearer token to a Principal (401 when
 * missing, unknown, revoked or expired) and applies the access policy for the matched route (403).
 */
import { HttpApiMiddleware, HttpApiSecurity, HttpRouter, HttpServerRequest } from "@effect/platform"
import { Context, Effect, Layer, Schema } from "effect"
import { Forbidden, Unauthorized } from "../Domain/Errors.js"
import { CurrentPrincipal, type TokenKind } from "../Domain/Principal.js"
import { AccessPolicy, refusal } from "./Access.js"
import { TokenResolver } from "./TokenResolver.js"

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(Unauthorized, Forbidden),
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** Token kinds allowed per route, looked up once per route rather than per request. */
const allowedByRoute = new WeakMap<HttpRouter.Route<unknown, unknown>, ReadonlyArray<TokenKind>>()
const allowedKinds = (route: HttpRouter.Route<unknown, unknown>): ReadonlyArray<TokenKind> => {
  let allowed = allowedByRoute.get(route)
  if (allowed === undefined) {
    allowed = AccessPolicy[`${route.method} ${route.path}`] ?? []
    allowedByRoute.set(route, allowed)
  }
  return allowed
}

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const resolver = yield* TokenResolver
    // Runs on every protected request: plain combinators, one context read, no generator.
    const authenticate = Effect.contextWithEffect((context: Context.Context<HttpServerRequest.HttpServerRequest | HttpRouter.RouteContext>) => {
      // The header is read here rather than from the decoded value so the scheme is checked too.
      const match = BEARER.exec(Context.get(context, HttpServerRequest.HttpServerRequest).headers.authorization ?? "")
      if (match === null || match[1] === undefined) return Effect.fail(new Unauthorized())
      const allowed = allowedKinds(Context.get(context, HttpRouter.RouteContext).route)
      return Effect.flatMap(resolver.resolve(match[1]), (principal) =>
        allowed.includes(principal.kind)
          ? Effect.succeed(principal)
          : Effect.fail(new Forbidden({ message: refusal(principal.kind, allowed), error: "forbidden_token_kind" })))
    })
    return Authentication.of({ bearer: () => authenticate })
  })
)

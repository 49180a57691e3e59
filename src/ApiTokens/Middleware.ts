/**
 * Authentication for every protected endpoint: resolves the Bearer token to a Principal (401 when
 * missing, unknown, revoked or expired) and applies the access policy for the matched route (403).
 */
import { HttpRouter, HttpServerRequest } from "@effect/platform"
import { Context, Effect, Either, Layer } from "effect"
import { EndpointPolicies, refusal } from "../Domain/Access.js"
import { Authentication } from "../Domain/Authentication.js"
import { Forbidden, Unauthorized } from "../Domain/Errors.js"
import type { Principal, TokenKind } from "../Domain/Principal.js"
import { TokenResolver } from "./TokenResolver.js"

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** Token kinds allowed per route (its `accepts` annotation), looked up once per route rather than per request. */
const allowedKindsOf = (policies: EndpointPolicies["Type"]) => {
  const allowedByRoute = new WeakMap<HttpRouter.Route<unknown, unknown>, ReadonlyArray<TokenKind>>()
  return (route: HttpRouter.Route<unknown, unknown>): ReadonlyArray<TokenKind> => {
    let allowed = allowedByRoute.get(route)
    if (allowed === undefined) {
      allowed = policies.acceptsOf(route.method, route.path)
      allowedByRoute.set(route, allowed)
    }
    return allowed
  }
}

/** The secret of a Bearer Authorization header, read from the header itself so the scheme is checked too. */
const bearerSecret = (authorization: string | undefined): string | undefined => BEARER.exec(authorization ?? "")?.[1]

const admitKind = (principal: Principal, allowed: ReadonlyArray<TokenKind>): Either.Either<Principal, Forbidden> =>
  allowed.includes(principal.kind)
    ? Either.right(principal)
    : Either.left(new Forbidden({ message: refusal(principal.kind, allowed), error: "forbidden_token_kind" }))

/** The principal behind an Authorization header, if its token kind may use an endpoint allowing `allowed`. */
export const authenticateBearer = (resolver: TokenResolver) =>
(
  authorization: string | undefined,
  allowed: ReadonlyArray<TokenKind>
): Effect.Effect<Principal, Unauthorized | Forbidden> => {
  const secret = bearerSecret(authorization)
  if (secret === undefined) return Effect.fail(new Unauthorized())
  return Effect.flatMap(resolver.resolve(secret), (principal) => admitKind(principal, allowed))
}

/** authenticateBearer's answer when it needs no database read (see TokenResolver.resolveNow); undefined when it does. */
export const authenticateBearerNow = (resolver: TokenResolver) =>
(
  authorization: string | undefined,
  allowed: ReadonlyArray<TokenKind>
): Either.Either<Principal, Unauthorized | Forbidden> | undefined => {
  const secret = bearerSecret(authorization)
  if (secret === undefined) return Either.left(new Unauthorized())
  const resolved = resolver.resolveNow(secret)
  return resolved === undefined ? undefined : Either.flatMap(resolved, (principal) => admitKind(principal, allowed))
}

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const check = authenticateBearer(yield* TokenResolver)
    const allowedKinds = allowedKindsOf(yield* EndpointPolicies)
    // Runs on every protected request: plain combinators, one context read, no generator.
    const authenticate = Effect.contextWithEffect((
      context: Context.Context<HttpServerRequest.HttpServerRequest | HttpRouter.RouteContext>
    ) =>
      check(
        Context.get(context, HttpServerRequest.HttpServerRequest).headers.authorization,
        allowedKinds(Context.get(context, HttpRouter.RouteContext).route)
      )
    )
    return Authentication.of({ bearer: () => authenticate })
  })
)

/**
 * The authentication contract every protected endpoint group declares: a Bearer token that resolves
 * to the request's Principal (401 when it does not, 403 when its kind may not use the route). The
 * implementation (token lookup, access policy) is ApiTokens/Middleware.ts's AuthenticationLive.
 */
import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { Schema } from "effect"
import { Wire } from "./Errors.js"
import { CurrentPrincipal } from "./Principal.js"

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(Wire.Unauthorized, Wire.Forbidden),
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

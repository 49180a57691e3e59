/**
 * Who may call an endpoint and how large a body it takes are annotations of the endpoint itself, in
 * its feature's Api.ts (`accepts(…)`, `operatorCredential(…)`, `bodyLimit(…)`). The Authentication
 * middleware, the edge's body bound and the OpenAPI text all read them from there, through
 * `EndpointPolicies` (built once from HubApi): nothing beside the contract to keep in step.
 */
import { HttpApi, type HttpApiEndpoint, type HttpApiGroup, type HttpMethod } from "@effect/platform"
import { Context, Layer, Option } from "effect"
import type { PayloadTooLarge } from "./Errors.js"
import { jsonBodyLimit } from "./PlainRoute.js"
import type { TokenKind } from "./Principal.js"
import { makeRouteFinder, type RouteOf } from "./Routes.js"

export const management: ReadonlyArray<TokenKind> = ["session", "organization"]
export const apiTokens: ReadonlyArray<TokenKind> = ["organization", "instance"]
export const instanceOnly: ReadonlyArray<TokenKind> = ["instance"]
export const sessionOnly: ReadonlyArray<TokenKind> = ["session"]
export const everyToken: ReadonlyArray<TokenKind> = ["session", "organization", "instance"]

/** The token kinds an endpoint behind the Authentication middleware accepts (none: every token is refused). */
export class Accepts extends Context.Tag("hub/Accepts")<Accepts, ReadonlyArray<TokenKind>>() {}

/** For an endpoint of the operator's tools that takes no api token: the credential it takes instead, in words. */
export class OperatorCredential extends Context.Tag("hub/OperatorCredential")<OperatorCredential, string>() {}

/** The largest body a route takes, enforced by the edge as the body streams, and its 413. */
export interface RouteBodyLimit {
  readonly bytes: number
  /** The 413 for a body over the limit (its declared length, when it declared one). */
  readonly tooLarge: (declared: number | undefined) => PayloadTooLarge
}

/** An endpoint's body limit when it is not a JSON route's (1 MiB). */
export class BodyLimit extends Context.Tag("hub/BodyLimit")<BodyLimit, RouteBodyLimit>() {}

/** Every JSON API route's limit, the default. */
const JSON_ROUTE_LIMIT: RouteBodyLimit = { bytes: jsonBodyLimit.bytes, tooLarge: () => jsonBodyLimit.tooLarge }

type AnyEndpoint<
  Name extends string,
  Method extends HttpMethod.HttpMethod,
  Path,
  UrlParams,
  Payload,
  Headers,
  Success,
  Error,
  R,
  RE
> = HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>

const annotating =
  <I, S>(tag: Context.Tag<I, S>, value: S) =>
  <Name extends string, Method extends HttpMethod.HttpMethod, Path, UrlParams, Payload, Headers, Success, Error, R, RE>(
    endpoint: AnyEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>
  ): AnyEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE> =>
    endpoint.annotate(tag, value)

/** The token kinds this endpoint accepts (apply before `documented`, which says them). */
export const accepts = (kinds: ReadonlyArray<TokenKind>) => annotating(Accepts, kinds)

/** The operator's credential this endpoint takes instead of an api token, in words (before `documented`). */
export const operatorCredential = (words: string) => annotating(OperatorCredential, words)

/** This endpoint's body limit, when it is not a JSON route's. */
export const bodyLimit = (limit: RouteBodyLimit) => annotating(BodyLimit, limit)

/** The token kinds of an endpoint's annotations (undefined: it takes no api token). */
export const acceptedKinds = (annotations: Context.Context<never>): ReadonlyArray<TokenKind> | undefined =>
  Option.getOrUndefined(Context.getOption(annotations, Accepts))

/** One endpoint's policy, read from its annotations (its group's, where the endpoint names none). */
export interface EndpointPolicy extends RouteOf {
  readonly accepts: ReadonlyArray<TokenKind> | undefined
  readonly bodyLimit: RouteBodyLimit
}

/** Every endpoint of an HttpApi with its policy. */
export const policiesOf = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<Id, Groups, E, R>
): ReadonlyArray<EndpointPolicy> => {
  const policies: Array<EndpointPolicy> = []
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, mergedAnnotations }) => {
      policies.push({
        method: endpoint.method,
        path: endpoint.path,
        accepts: acceptedKinds(mergedAnnotations),
        bodyLimit: Option.getOrElse(Context.getOption(mergedAnnotations, BodyLimit), () => JSON_ROUTE_LIMIT)
      })
    }
  })
  return policies
}

/** The policies of the served API: who may call a matched route, and the body limit of a request's path. */
export class EndpointPolicies extends Context.Tag("hub/EndpointPolicies")<EndpointPolicies, {
  /** The token kinds a matched route (`method`, its pattern) accepts; none for a route without a policy. */
  readonly acceptsOf: (method: string, pattern: RouteOf["path"]) => ReadonlyArray<TokenKind>
  /** The body limit of a request, by its method and URL (a JSON route's where no route matches). */
  readonly bodyLimitOf: (method: string, url: string) => RouteBodyLimit
  /** The largest body any route takes: Bun's own bound on every request. */
  readonly maxBodyBytes: number
}>() {
  static readonly fromApi = <Id extends string, Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
    api: HttpApi.HttpApi<Id, Groups, E, R>
  ) => Layer.succeed(EndpointPolicies, EndpointPolicies.of(endpointPoliciesOf(policiesOf(api))))
}

/** The lookups over a list of policies (a route's kinds by its pattern; a body limit by the request's path). */
export const endpointPoliciesOf = (policies: ReadonlyArray<EndpointPolicy>): EndpointPolicies["Type"] => {
  const kinds = new Map(policies.map((policy) => [`${policy.method} ${policy.path}`, policy.accepts ?? []]))
  const limits = new Map(policies.map((policy) => [`${policy.method} ${policy.path}`, policy.bodyLimit]))
  const bodyLimitOf = makeRouteFinder(
    policies,
    (method, pattern) => limits.get(`${method} ${pattern}`) ?? JSON_ROUTE_LIMIT,
    () => JSON_ROUTE_LIMIT
  )
  return {
    acceptsOf: (method, pattern) => kinds.get(`${method} ${pattern}`) ?? [],
    bodyLimitOf,
    maxBodyBytes: Math.max(JSON_ROUTE_LIMIT.bytes, ...policies.map((policy) => policy.bodyLimit.bytes))
  }
}

const kindNames: Record<TokenKind, string> = {
  session: "a session token",
  organization: "an organization token",
  instance: "an instance token"
}

/** Why a token kind is refused, in words a caller can act on. */
export const refusal = (kind: TokenKind, allowed: ReadonlyArray<TokenKind>): string => {
  const wanted = allowed.map((k) => kindNames[k]).join(" or ")
  return allowed.length === 0
    ? "This endpoint has no access policy"
    : `This endpoint needs ${wanted}; ${kindNames[kind]} cannot be used here`
}

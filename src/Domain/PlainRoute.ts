/**
 * The contract between the server's edge and a feature's plain hot-route handler (see
 * Edge/FastLane.ts): what the handler is given to answer with, and the request-reading helpers it
 * shares with HttpApi's way of reading bodies. Features implement handlers against this; only the
 * edge installs them, so no feature imports the edge.
 */
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { type Cause, Context, Effect, type Scope, type Tracer } from "effect"
import { boundedRequest, declaredLength, isBodyTooLarge, JSON_BODY_LIMIT } from "../Net/BodyLimit.js"
import { BadRequest, PayloadTooLarge } from "./Errors.js"

/** The two endpoints served on the fast lane. */
export type HotRoute = "POST /api/messages" | "POST /upstream/events"

/** How a plain hot route answers (see Edge/FastLane.ts installPlainHotRoute). */
export interface PlainResponder {
  /** A 200 with `body` as JSON, as the edge answers it: `x-request-id`, and the access log; `log` runs first, in the request's log context. */
  readonly json: (body: unknown, log?: Effect.Effect<void>) => Response
  /** The answer to a failure, rendered by the edge itself (a 500 for a defect, a 503 while stopping). */
  readonly fail: (cause: Cause.Cause<unknown>) => Promise<Response>
  /** The answer of an effect run behind the edge, in a fiber: for the requests the plain way does not serve. */
  readonly run: (answer: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown>) => Promise<Response>
  /** Runs `effect` in a fiber, in the request's log context (its logs carry the request's id). */
  readonly inRequest: RunInRequest
  /** The request's server span when tracing is on (Tracing/Spans.ts): the parent of the handler's own. */
  readonly span: Tracer.Span | undefined
}

/** Runs an effect that cannot fail from plain code, as the caller's context has it (its logs annotated alike). */
export type RunInRequest = <A>(effect: Effect.Effect<A>) => Promise<A>

/**
 * The hot routes' handlers: Bun's own router calls them (Edge/FastLane.ts), and so do HubApi's
 * declarations of the same endpoints (`servedByHotRoute`), so each has one implementation.
 */
export class HotRoutes extends Context.Tag("HotRoutes")<HotRoutes, {
  /** Serves `route` with `handler` until the scope closes. */
  readonly install: (
    route: HotRoute,
    handler: (request: Request) => Promise<Response>
  ) => Effect.Effect<void, never, Scope.Scope>
  /** Answers `request` with `route`'s installed handler (503 while none is). */
  readonly serve: (route: HotRoute, request: Request) => Promise<Response>
}>() {}

/**
 * HubApi's handler of a hot route (declared there for the document and the typed client): the
 * request handed to the one handler Bun's router calls. Bun routes every such request to it before
 * HttpApi sees it, so this runs only where a request reaches HttpApi first (no path does on the hub's
 * server); its answer is then logged by both edges.
 */
export const servedByHotRoute =
  (route: HotRoute) => (options: { readonly request: HttpServerRequest.HttpServerRequest }) =>
    Effect.gen(function*() {
      const routes = yield* HotRoutes
      const request = yield* Effect.orDie(HttpServerRequest.toWeb(options.request))
      return HttpServerResponse.fromWeb(yield* Effect.promise(() => routes.serve(route, request)))
    })

/** A feature's plain handler for one hot route, with what the edge waits for before it stops. */
export interface PlainRoute {
  readonly route: HotRoute
  readonly handle: (request: Request, edge: PlainResponder) => Promise<Response>
  /** What to wait for when the route is removed, before the edge's fibers stop (work its requests left running). */
  readonly drained?: Effect.Effect<void>
}

export const malformedJson = new BadRequest({
  message: "Malformed request body: it is not valid JSON",
  error: "malformed_body"
})

const contentTypeOf = (request: Request) =>
  (request.headers.get("content-type") ?? "application/json").toLowerCase().trim()

const isJsonType = (contentType: string) => contentType.includes("application/json")

/** Whether requestPayload reads the body as JSON: it says JSON or says nothing. */
export const declaresJson = (request: Request) => isJsonType(contentTypeOf(request))

const formFields = (form: FormData) => {
  const fields: Record<string, FormDataEntryValue> = {}
  form.forEach((value, name) => {
    fields[name] = value
  })
  return fields
}

/** A body limit and the 413 that refuses a body over it. */
export interface BodyLimit {
  readonly bytes: number
  readonly tooLarge: PayloadTooLarge
}

/** Every JSON API route's limit (Net/BodyLimit.ts JSON_BODY_LIMIT, 1 MiB). */
export const jsonBodyLimit: BodyLimit = {
  bytes: JSON_BODY_LIMIT,
  tooLarge: new PayloadTooLarge({ message: "The request body is larger than 1 MB", error: "payload_too_large" })
}

/**
 * The body as HttpApi reads it for a schema payload, by content type: JSON when it says JSON or says
 * nothing, form fields, text, or bytes otherwise (which the payload schema then refuses alike). The
 * body is bounded as it streams (Net/BodyLimit.ts): past `limit` it is refused with its 413.
 */
export const requestPayload = (
  request: Request,
  limit: BodyLimit
): Effect.Effect<unknown, BadRequest | PayloadTooLarge> => {
  const declared = declaredLength(request.headers.get("content-length"))
  if (declared !== undefined && declared > limit.bytes) return Effect.fail(limit.tooLarge)
  const bounded = boundedRequest(request, limit.bytes)
  const readBody = <A>(read: () => Promise<A>): Effect.Effect<A, BadRequest | PayloadTooLarge> =>
    Effect.tryPromise({ try: read, catch: (cause) => (isBodyTooLarge(cause) ? limit.tooLarge : malformedJson) })
  const contentType = contentTypeOf(request)
  if (isJsonType(contentType)) return readBody(() => bounded.json())
  if (contentType.includes("multipart/form-data")) return readBody(async () => formFields(await bounded.formData()))
  if (contentType.includes("x-www-form-urlencoded")) {
    return readBody(async () => Object.fromEntries(new URLSearchParams(await bounded.text())))
  }
  if (contentType.startsWith("text/")) return readBody(() => bounded.text())
  return readBody(async () => new Uint8Array(await bounded.arrayBuffer()))
}

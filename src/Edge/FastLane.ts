/**
 * The fast lane. The two endpoints every message and every upstream event pass through
 * (`POST /api/messages`, `POST /upstream/events`) are routed by Bun itself and run their Effect
 * handler directly: HttpApi's per-request router, middleware chain, request wrapper and response
 * conversion cost 100–150 µs of CPU per request (measured with `bun --cpu-prof-md`), more than the
 * handlers themselves. The contract does not change: the same access policy and TokenResolver, the
 * same schemas, the same edge (error bodies, `x-request-id`, access log). HubApi still declares both
 * endpoints (the OpenAPI document, the typed client); its handlers hand the request to the same
 * handler (Domain/PlainRoute.ts `servedByHotRoute`). Every other request goes through HttpApi.
 */
import { HttpServerResponse } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { Cause, Duration, Effect, FiberSet, Layer, type Tracer } from "effect"
import { HubConfig } from "../Config.js"
import { EndpointPolicies, type RouteBodyLimit } from "../Domain/Access.js"
import { type HotRoute, HotRoutes, type PlainResponder, type PlainRoute } from "../Domain/PlainRoute.js"
import { Metrics, type RouteRecorder } from "../Metrics/Metrics.js"
import { MAX_POLL_WAIT_SECONDS } from "../Poll/Api.js"
import { endSpan, HubTracer, parentOf, startSpan } from "../Tracing/Spans.js"
import { atEdge, logRequest, logsRequests, requestIdFor, type RequestLine } from "./Middleware.js"

const starting = () =>
  Promise.resolve(
    Response.json({ statusCode: 503, message: "The hub is starting or stopping; retry shortly", error: "not_ready" }, {
      status: 503
    })
  )

/** Bun's own bound (255 s) on idleTimeout. */
const MAX_IDLE_TIMEOUT_SECONDS = 255

/**
 * How long Bun lets a connection be silent: past the longest an answer may take to begin (a Graph
 * call or upload, a webhook test waiting for its attempt), with a margin. Bun's default, 10 s, cut
 * such requests short (their connection reset before the answer). A long poll waits up to
 * MAX_POLL_WAIT_SECONDS for an event.
 */
const idleTimeoutSeconds = (config: {
  readonly graphTimeout: Duration.Duration
  readonly graphUploadTimeout: Duration.Duration
  readonly webhookTimeout: Duration.Duration
}) => {
  const longest = Math.max(
    ...[config.graphTimeout, config.graphUploadTimeout, config.webhookTimeout].map(Duration.toSeconds),
    MAX_POLL_WAIT_SECONDS
  )
  return Math.min(MAX_IDLE_TIMEOUT_SECONDS, Math.ceil(longest) + 10)
}

/**
 * The hub's Bun server: HttpApi serves every request but the hot routes, which Bun routes to the
 * handlers installed through HotRoutes (503 until they are, and once they are gone).
 */
export const hubServer = (options: { readonly port: number; readonly hostname: string }) =>
  Layer.unwrapEffect(Effect.zipWith(EndpointPolicies, HubConfig, (policies, config) => {
    const handlers = new Map<HotRoute, (request: Request) => Promise<Response>>()
    const dispatch = (route: HotRoute) => (request: Request) => (handlers.get(route) ?? starting)(request)
    const hotRoutes = HotRoutes.of({
      install: (route, handler) =>
        Effect.acquireRelease(
          Effect.sync(() => handlers.set(route, handler)),
          () => Effect.sync(() => handlers.delete(route))
        ),
      serve: (route, request) => dispatch(route)(request)
    })
    return Layer.merge(
      BunHttpServer.layer({
        ...options,
        // Each route's limit is enforced by the edge as the body streams, answered with its JSON 413; Bun's
        // own (a bare 413) only meets declared lengths far beyond any route's.
        maxRequestBodySize: 8 * policies.maxBodyBytes,
        idleTimeout: idleTimeoutSeconds(config),
        routes: {
          "/api/messages": { POST: dispatch("POST /api/messages") },
          "/upstream/events": { POST: dispatch("POST /upstream/events") }
        }
      }),
      Layer.succeed(HotRoutes, hotRoutes)
    )
  }))

const interrupted = HttpServerResponse.unsafeJson(
  { statusCode: 503, message: "The hub is stopping; retry shortly", error: "not_ready" },
  { status: 503 }
)

/** What the edge knows of a hot route's request. */
const lineOf = (route: HotRoute, request: Request, bodyLimit: RouteBodyLimit): RequestLine => ({
  method: route.slice(0, route.indexOf(" ")),
  url: pathOf(request.url),
  requestId: request.headers.get("x-request-id") ?? undefined,
  bodyLimit
})

/** `answer` behind the edge, run with `run`, as a web Response (503 if the hub interrupts it while stopping). */
const atEdgeOn = <R>(
  run: (
    effect: Effect.Effect<HttpServerResponse.HttpServerResponse, never, R>
  ) => Promise<HttpServerResponse.HttpServerResponse>,
  line: RequestLine,
  logRequests: boolean,
  answer: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, R>,
  recorder: RouteRecorder,
  startedAt: number
) =>
  run(Effect.catchAllCause(atEdge(line, logRequests, answer, recorder, startedAt), () => Effect.succeed(interrupted)))
    .then((response) => HttpServerResponse.toWeb(response))

/**
 * Installs a plain async handler for `route`, without a fiber per request: for upstream posts, where
 * even the edge's fiber cost about as much as the rest of the request (measured: about 55 µs of CPU
 * a post, against about 50 µs for Bun, the signature and the JSON together), and for sends. Its successes are
 * answered as the edge answers them; every failure, and a handler that throws, goes to the edge
 * to be rendered and logged.
 */
export const installPlainHotRoute = ({ drained = Effect.void, handle: handler, route }: PlainRoute) =>
  Effect.gen(function*() {
    const logRequests = logsRequests(yield* HubConfig)
    const method = route.slice(0, route.indexOf(" "))
    const path = route.slice(route.indexOf(" ") + 1)
    const recorder = (yield* Metrics).route(method, path)
    const bodyLimit = (yield* EndpointPolicies).bodyLimitOf(method, path)
    const tracer = yield* HubTracer
    const run = yield* FiberSet.makeRuntimePromise<never>()
    const runFork = yield* FiberSet.makeRuntime<never>()
    // Finalizers run last first: the route is removed, then this waits, then the fibers stop.
    yield* Effect.addFinalizer(() => drained)
    yield* Effect.flatMap(HotRoutes, (routes) =>
      routes.install(route, (request) => {
        const offered = lineOf(route, request, bodyLimit)
        // Fixed at once, so that logs made while the request runs (`inRequest`) carry the id it is answered with.
        const requestId = requestIdFor(offered.requestId)
        const line: RequestLine = { ...offered, requestId }
        const startedAt = performance.now()
        const edge: PlainResponder = {
          json: (body, log, answer) => {
            const status = answer?.status ?? 200
            recorder.observe(status, (performance.now() - startedAt) / 1000)
            if (log !== undefined || logRequests) {
              const accessLine = logRequests ? logRequest(line, status, startedAt) : Effect.void
              runFork(
                Effect.annotateLogs(
                  log === undefined ? accessLine : Effect.zipRight(log, accessLine),
                  "requestId",
                  requestId
                )
              )
            }
            return new Response(JSON.stringify(body), {
              status,
              headers: { ...answer?.headers, "content-type": "application/json", "x-request-id": requestId }
            })
          },
          fail: (cause) => atEdgeOn(run, line, logRequests, Effect.failCause(cause), recorder, startedAt),
          run: (answer) => atEdgeOn(run, line, logRequests, answer, recorder, startedAt),
          inRequest: (effect) => run(Effect.annotateLogs(effect, "requestId", requestId)),
          span: undefined
        }
        if (tracer === undefined) return handler(request, edge).catch((defect: unknown) => edge.fail(Cause.die(defect)))
        return traced(tracer, route, request, requestId, edge, handler)
      }))
  })

/**
 * A hot route's request as a server span (under the caller's `traceparent`, if it sent one): the
 * handler's own spans and the effects it runs (`run`, `inRequest`) are its children.
 */
const traced = (
  tracer: Tracer.Tracer,
  route: HotRoute,
  request: Request,
  requestId: string,
  edge: PlainResponder,
  handler: PlainRoute["handle"]
) => {
  const span = startSpan(tracer, route, parentOf(request.headers.get("traceparent")), "server", {
    "http.request.method": route.slice(0, route.indexOf(" ")),
    "http.route": route.slice(route.indexOf(" ") + 1),
    "hub.request_id": requestId
  })
  const inSpan: PlainResponder = {
    ...edge,
    span,
    run: (answer) => edge.run(Effect.withParentSpan(answer, span)),
    inRequest: (effect) => edge.inRequest(Effect.withParentSpan(effect, span))
  }
  return handler(request, inSpan).catch((defect: unknown) => inSpan.fail(Cause.die(defect))).then((response) => {
    span.attribute("http.response.status_code", response.status)
    endSpan(span, response.status >= 500 ? `answered ${response.status}` : undefined)
    return response
  })
}

/** The path and query of an absolute request URL. */
const pathOf = (url: string) => url.slice(url.indexOf("/", url.indexOf("//") + 2))

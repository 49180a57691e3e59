/** The HTTP server: HubApi with its handlers, Swagger UI at /docs, OpenAPI at /openapi.json. */
import { HttpApiBuilder, HttpApiSwagger, HttpMiddleware, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { HubApi } from "./Api.js"
import { AuthHttpLive } from "./Auth/Http.js"
import { AuthenticationLive } from "./Auth/Middleware.js"
import { TokensRepoLive } from "./Auth/Repo.js"
import { RevocationFeedServerLive } from "./Auth/RevocationFeed.js"
import { TokenResolver } from "./Auth/TokenResolver.js"
import { HubConfig } from "./Config.js"
import { type HotRoutes, hubServer, installPlainHotRoute } from "./Edge/FastLane.js"
import { makeUpstreamPostPlainRoute } from "./Ingress/FastRoute.js"
import { makeSendPlainRoute } from "./Messages/FastRoute.js"
import { HealthHttpLive } from "./Health/Http.js"
import { ReadinessLive } from "./Health/Readiness.js"
import { HttpEdgeLive } from "./Edge/Middleware.js"
import { SecretCipher } from "./Sql/SecretCipher.js"
import { InstancesHttpLive } from "./Instances/Http.js"
import { InstanceAccess } from "./Instances/InstanceAccess.js"
import { InstancesRepoLive } from "./Instances/Repo.js"
import { AnalyticsHttpLive } from "./Analytics/Http.js"
import { BlockUsersHttpLive } from "./BlockUsers/Http.js"
import { BusinessProfileHttpLive } from "./BusinessProfile/Http.js"
import { CallsHttpLive } from "./Calls/Http.js"
import { FlowsHttpLive } from "./Flows/Http.js"
import { GroupsHttpLive } from "./Groups/Http.js"
import { MediaHttpLive } from "./Media/Http.js"
import { MessagesHttpLive } from "./Messages/Http.js"
import { MessageSender } from "./Messages/Send.js"
import { PhoneNumbersHttpLive } from "./PhoneNumbers/Http.js"
import { QrCodesHttpLive } from "./QrCodes/Http.js"
import { TemplatesHttpLive } from "./Templates/Http.js"
import { MemoryTargetLive } from "./MemoryTarget.js"
import { CheckpointerLive } from "./Sql/Checkpointer.js"
import { SqlLive } from "./Sql/Client.js"
import { WriteBatcherLive } from "./Sql/WriteBatcher.js"
import { UpstreamLive } from "./Upstream/Layer.js"
import { DispatcherLive } from "./Delivery/Dispatcher.js"
import { RetentionScheduleLive } from "./Delivery/Retention.js"
import { IngressServicesLive, SandboxEventsLive } from "./Ingress/Layer.js"
import { WebhooksRepo } from "./Webhooks/Repo.js"
import { UpstreamEventsHttpLive } from "./Ingress/Http.js"
import { SandboxHttpLive } from "./Sandbox/Http.js"
import { WebhooksHttpLive } from "./Webhooks/Http.js"
import { DashboardHttpLive, DocsSecurityHeadersLive } from "./Dashboard/Http.js"
import { LiveEventsHttpLive } from "./LiveEvents/Http.js"
import { LiveEventsLive } from "./LiveEvents/LiveEvents.js"
import { MetricsHttpLive } from "./Metrics/Http.js"
import { metricsLayer } from "./Metrics/Live.js"
import { apiRoutes, type RouteOf } from "./Metrics/Routes.js"

/**
 * What every service stands on: the database named by the config, its group commit, the key for
 * secrets at rest, readiness. Provided beneath everything, once.
 */
const FoundationLive = Layer.mergeAll(WriteBatcherLive, SecretCipher.Default).pipe(
  Layer.provideMerge(Layer.merge(SqlLive, ReadinessLive))
)

/** The upstream (Graph or the sandbox, whose events enter through the ingress like the real upstream's). */
const UpstreamServicesLive = UpstreamLive.pipe(Layer.provide(SandboxEventsLive), Layer.provideMerge(IngressServicesLive))

/**
 * The hub's services. Each declares its own dependencies (Effect.Service's `dependencies`, or the
 * feature's layer); a layer named twice is built once (layers are memoized by reference).
 */
export const ServicesLive = Layer.mergeAll(
  TokenResolver.Default,
  InstanceAccess.Default,
  MessageSender.Default,
  TokensRepoLive,
  InstancesRepoLive,
  WebhooksRepo.Default
).pipe(
  Layer.provideMerge(UpstreamServicesLive),
  // Beneath the ingress, which publishes what it commits to the live streams when they exist.
  Layer.provideMerge(LiveEventsLive),
  Layer.provideMerge(FoundationLive)
)

const ApiLive = HttpApiBuilder.api(HubApi).pipe(
  Layer.provide([HealthHttpLive, AuthHttpLive, InstancesHttpLive]),
  Layer.provide(MessagesHttpLive),
  Layer.provide([MediaHttpLive, TemplatesHttpLive, PhoneNumbersHttpLive, CallsHttpLive, AnalyticsHttpLive]),
  Layer.provide([QrCodesHttpLive, FlowsHttpLive, GroupsHttpLive, BusinessProfileHttpLive, BlockUsersHttpLive]),
  Layer.provide([WebhooksHttpLive, UpstreamEventsHttpLive, SandboxHttpLive, LiveEventsHttpLive, MetricsHttpLive]),
  Layer.provide(AuthenticationLive)
)

/** What the server answers beside HubApi's endpoints (HttpLive below): the request metrics' routes besides those. */
const PLAIN_ROUTES: ReadonlyArray<RouteOf> = [
  { method: "GET", path: "/" },
  { method: "GET", path: "/dashboard" },
  { method: "GET", path: "/dashboard/*" },
  { method: "GET", path: "/docs" },
  { method: "GET", path: "/openapi.json" }
]

/** The hub's metrics (HUB_METRICS), the routes its request metrics know. */
const MetricsLive = metricsLayer([...apiRoutes(HubApi), ...PLAIN_ROUTES])

/** The server bound to HOST and PORT from the config, with the fast lane's routes. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(HubConfig, (config) => hubServer({ port: config.port, hostname: config.host }))
)

/** The hot endpoints served on the fast lane, beside HttpApi (see Edge/FastLane.ts). */
const FastLaneLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    yield* installPlainHotRoute(yield* makeSendPlainRoute)
    yield* installPlainHotRoute(yield* makeUpstreamPostPlainRoute)
  })
)

/** Serves the hub on whatever HttpServer is provided (ServerLive, or port 0 in tests). */
export const HttpLive = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(DocsSecurityHeadersLive),
  Layer.provide(DashboardHttpLive),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
  Layer.provide(HttpEdgeLive),
  Layer.provide(ApiLive),
  HttpServer.withLogAddress
)

/** The whole hub on the given server layer (`hubServer`), exposing its services and server (tests use them). */
export const hubLayer = <ROut, E, R>(server: Layer.Layer<ROut | HotRoutes, E, R>) =>
  // The dispatcher and the retention pruner start with the server; the dispatcher drains when it stops.
  HttpLive.pipe(
    Layer.merge(FastLaneLive),
    Layer.merge(CheckpointerLive),
    Layer.merge(DispatcherLive),
    Layer.merge(RetentionScheduleLive),
    Layer.merge(MemoryTargetLive),
    Layer.merge(RevocationFeedServerLive),
    Layer.provideMerge(server),
    Layer.provideMerge(ServicesLive),
    // Beneath everything that observes: services read Metrics as they are built (without it, they keep nothing).
    Layer.provideMerge(MetricsLive),
    // No tracer exporter is configured, so spans would only cost time on every request (clock reads, attributes).
    Layer.provide(Layer.setTracerEnabled(false)),
    HttpMiddleware.withTracerDisabledWhen(() => true)
  )

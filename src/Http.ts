/** The HTTP server: HubApi with its handlers, Swagger UI at /docs, OpenAPI at /openapi.json. */
import { HttpApiBuilder, HttpApiSwagger, HttpMiddleware, HttpServer } from "@effect/platform"
import { Effect, Layer } from "effect"
import { AnalyticsHttpLive } from "./Analytics/Http.js"
import { HubApi } from "./Api.js"
import { AuthHttpLive } from "./ApiTokens/Http.js"
import { AuthenticationLive } from "./ApiTokens/Middleware.js"
import { TokensRepoLive } from "./ApiTokens/Repo.js"
import { RevocationFeedServerLive } from "./ApiTokens/RevocationFeed.js"
import { TokenResolver } from "./ApiTokens/TokenResolver.js"
import { BlockUsersHttpLive } from "./BlockUsers/Http.js"
import { Broadcasts } from "./Broadcasts/Broadcasts.js"
import { BroadcastsHttpLive } from "./Broadcasts/Http.js"
import { BusinessProfileHttpLive } from "./BusinessProfile/Http.js"
import { CallsHttpLive } from "./Calls/Http.js"
import { HubConfig } from "./Config.js"
import { DashboardHttpLive, DocsSecurityHeadersLive } from "./Dashboard/Http.js"
import { DispatcherLive } from "./Delivery/Dispatcher.js"
import { RetentionScheduleLive } from "./Delivery/Retention.js"
import { EndpointPolicies } from "./Domain/Access.js"
import type { HotRoutes } from "./Domain/PlainRoute.js"
import { apiRoutes, type RouteOf } from "./Domain/Routes.js"
import { hubServer, installPlainHotRoute } from "./Edge/FastLane.js"
import { HttpEdgeLive } from "./Edge/Middleware.js"
import { FlowsHttpLive } from "./Flows/Http.js"
import { GroupsHttpLive } from "./Groups/Http.js"
import { HealthHttpLive } from "./Health/Http.js"
import { ReadinessLive } from "./Health/Readiness.js"
import { InstancesHttpLive } from "./Instances/Http.js"
import { InstanceAccess } from "./Instances/InstanceAccess.js"
import { InstancesRepoLive } from "./Instances/Repo.js"
import { LiveEventsHttpLive } from "./LiveEvents/Http.js"
import { LiveEventsLive } from "./LiveEvents/LiveEvents.js"
import { MediaHttpLive } from "./Media/Http.js"
import { MemoryTargetLive } from "./MemoryTarget.js"
import { makeSendPlainRoute } from "./Messages/FastRoute.js"
import { MessagesHttpLive } from "./Messages/Http.js"
import { MessageSender } from "./Messages/Send.js"
import { MetricsHttpLive } from "./Metrics/Http.js"
import { metricsLayer } from "./Metrics/Live.js"
import { PhoneNumbersHttpLive } from "./PhoneNumbers/Http.js"
import { ThroughputRepo } from "./PhoneNumbers/ThroughputRepo.js"
import { PollHttpLive } from "./Poll/Http.js"
import { QrCodesHttpLive } from "./QrCodes/Http.js"
import { ReplaysHttpLive } from "./Replays/Http.js"
import { SandboxEventsLive } from "./Sandbox/Feed.js"
import { SandboxHttpLive } from "./Sandbox/Http.js"
import { SendCancellation } from "./SendQueue/Cancel.js"
import { SendQueueDrainer } from "./SendQueue/Drainer.js"
import { SendQueueHttpLive } from "./SendQueue/Http.js"
import { QueuedSends } from "./SendQueue/QueuedSends.js"
import { QueueSnapshotsLive, SendQueues } from "./SendQueue/Queues.js"
import { SendQueueRepo } from "./SendQueue/Repo.js"
import { CheckpointerLive } from "./Sql/Checkpointer.js"
import { SqlLive } from "./Sql/Client.js"
import { PgListenerLive } from "./Sql/Notify.js"
import { SecretCipher } from "./Sql/SecretCipher.js"
import { WriteBatcherLive } from "./Sql/WriteBatcher.js"
import { StatsHttpLive } from "./Stats/Http.js"
import { QueueDepthSampler, QueueDepthSamplingLive } from "./Stats/QueueDepthSampler.js"
import { Stats } from "./Stats/Stats.js"
import { TemplatesHttpLive } from "./Templates/Http.js"
import { withTracing } from "./Tracing/Layer.js"
import { UpstreamLive } from "./Upstream/Layer.js"
import { makeUpstreamPostPlainRoute } from "./UpstreamEvents/FastRoute.js"
import { UpstreamEventsHttpLive } from "./UpstreamEvents/Http.js"
import { IngressServicesLive } from "./UpstreamEvents/Layer.js"
import { WebhooksHttpLive } from "./Webhooks/Http.js"
import { WebhooksRepo } from "./Webhooks/Repo.js"

/** What the server answers beside HubApi's endpoints (HttpLive below): the request metrics' routes besides those. */
const PLAIN_ROUTES: ReadonlyArray<RouteOf> = [
  { method: "GET", path: "/" },
  { method: "GET", path: "/dashboard" },
  { method: "GET", path: "/dashboard/*" },
  { method: "GET", path: "/docs" },
  { method: "GET", path: "/openapi.json" }
]

/** The hub's metrics (HUB_METRICS: kept, or Metrics.Off), the routes its request metrics know. */
const MetricsLive = metricsLayer([...apiRoutes(HubApi), ...PLAIN_ROUTES])

/**
 * What every service stands on, each part needing only the config: the database HUB_DB names and
 * this replica's listener on it, readiness, the metrics and the live event streams.
 */
const PlatformLive = Layer.mergeAll(SqlLive, PgListenerLive, ReadinessLive, MetricsLive, LiveEventsLive)

/** The platform, with the group commit and the key for secrets at rest, which stand on it. */
const FoundationLive = Layer.mergeAll(WriteBatcherLive, SecretCipher.Default).pipe(Layer.provideMerge(PlatformLive))

/**
 * `layer` over the foundation. FoundationLive is one layer, built once however many services name it
 * (layers are memoized by reference), so the services below may be listed in any order.
 */
const overFoundation = <ROut, E, RIn>(layer: Layer.Layer<ROut, E, RIn>) => Layer.provide(layer, FoundationLive)

/** The ingress (upstream posts to outbox rows), the unrouted store and the delivery engine's services. */
const IngressStackLive = overFoundation(IngressServicesLive)

/** The upstream (Graph or the sandbox, whose events enter through the ingress like the real upstream's). */
const UpstreamStackLive = overFoundation(
  UpstreamLive.pipe(Layer.provide(SandboxEventsLive), Layer.provide(IngressStackLive))
)

/**
 * Queued sends (the drainer with them), whose outcomes are events delivered by the engine the ingress
 * stands on (SendQueue/QueueEvents.ts).
 */
const QueuedSendsLive = QueuedSends.Default.pipe(Layer.provide([UpstreamStackLive, IngressStackLive]))

/** The send queues as callers see them, over the instances they belong to. */
const SendQueuesLive = SendQueues.Default.pipe(Layer.provide(InstancesRepoLive))

/**
 * The hub's services: a list, each over what it declares (Effect.Service's `dependencies`, the
 * feature's layer, or the stacks above); a layer named twice is built once.
 */
const ServicesLive = Layer.mergeAll(
  FoundationLive,
  IngressStackLive,
  UpstreamStackLive,
  overFoundation(MessageSender.Default.pipe(Layer.provide(UpstreamStackLive))),
  overFoundation(QueuedSendsLive),
  overFoundation(ThroughputRepo.Default),
  overFoundation(SendQueueRepo.Default),
  overFoundation(SendQueuesLive),
  overFoundation(QueueSnapshotsLive.pipe(Layer.provide(SendQueuesLive))),
  overFoundation(Broadcasts.Default.pipe(Layer.provide([QueuedSendsLive, UpstreamStackLive, IngressStackLive]))),
  overFoundation(Stats.Default),
  overFoundation(QueueDepthSampler.Default),
  overFoundation(SendCancellation.Default.pipe(Layer.provide(IngressStackLive))),
  overFoundation(SendQueueDrainer.Default.pipe(Layer.provide([UpstreamStackLive, IngressStackLive]))),
  overFoundation(TokenResolver.Default),
  overFoundation(InstanceAccess.Default),
  overFoundation(TokensRepoLive),
  overFoundation(InstancesRepoLive),
  overFoundation(WebhooksRepo.Default)
)

const ApiLive = HttpApiBuilder.api(HubApi).pipe(
  Layer.provide([HealthHttpLive, AuthHttpLive, InstancesHttpLive]),
  Layer.provide([MessagesHttpLive, BroadcastsHttpLive, SendQueueHttpLive, StatsHttpLive]),
  Layer.provide([MediaHttpLive, TemplatesHttpLive, PhoneNumbersHttpLive, CallsHttpLive, AnalyticsHttpLive]),
  Layer.provide([QrCodesHttpLive, FlowsHttpLive, GroupsHttpLive, BusinessProfileHttpLive, BlockUsersHttpLive]),
  Layer.provide([WebhooksHttpLive, UpstreamEventsHttpLive, SandboxHttpLive, LiveEventsHttpLive, MetricsHttpLive]),
  Layer.provide([ReplaysHttpLive, PollHttpLive]),
  Layer.provide(AuthenticationLive)
)

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

/** Who may call each endpoint and the body each takes: read from HubApi's own annotations. */
const EndpointPoliciesLive = EndpointPolicies.fromApi(HubApi)

/** Serves the hub on whatever HttpServer is provided (ServerLive, or port 0 in tests). */
export const HttpLive = HttpApiBuilder.serve().pipe(
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(DocsSecurityHeadersLive),
  Layer.provide(DashboardHttpLive),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
  Layer.provide(HttpEdgeLive),
  Layer.provide(ApiLive),
  Layer.provide(EndpointPoliciesLive),
  HttpServer.withLogAddress
)

/**
 * The whole hub on the given server layer (`hubServer`), exposing its services and server (tests use
 * them): what it serves and the background work (the dispatcher and the retention pruner start with the
 * server; the dispatcher drains when it stops), over the server, over the services.
 */
export const hubLayer = <ROut, E, R>(server: Layer.Layer<ROut | HotRoutes, E, R>) =>
  withTracing(
    Layer.mergeAll(
      HttpLive,
      FastLaneLive,
      CheckpointerLive,
      DispatcherLive,
      RetentionScheduleLive,
      QueueDepthSamplingLive,
      MemoryTargetLive,
      RevocationFeedServerLive
    ).pipe(
      Layer.provideMerge(server),
      Layer.provideMerge(ServicesLive),
      Layer.provide(EndpointPoliciesLive),
      // HttpApi's own request spans stay off, tracing or not: they would carry the query (GET /upstream/events
      // has the verify token in it). The hot routes' spans are the edge's (Edge/FastLane.ts).
      HttpMiddleware.withTracerDisabledWhen(() => true)
    )
  )

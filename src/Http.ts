/** The HTTP server: HubApi with its handlers, Swagger UI at /docs, OpenAPI at /openapi.json. */
import { HttpApiBuilder, HttpApiSwagger, HttpServer } from "@effect/platform"
import { BunHttpServer } from "@effect/platform-bun"
import { Effect, Layer } from "effect"
import { HubApi } from "./Api.js"
import { AuthHttpLive } from "./Auth/Http.js"
import { AuthenticationLive } from "./Auth/Middleware.js"
import { TokensRepoLive } from "./Auth/Repo.js"
import { TokenResolverLive } from "./Auth/TokenResolver.js"
import { HubConfig } from "./Config.js"
import { HealthHttpLive } from "./Health/Http.js"
import { ErrorResponseLive, requestLog } from "./HttpMiddleware.js"
import { AccessTokenCipherLive } from "./Instances/AccessTokenCipher.js"
import { InstancesHttpLive } from "./Instances/Http.js"
import { InstanceAccessLive } from "./Instances/InstanceAccess.js"
import { InstancesRepoLive } from "./Instances/Repo.js"
import { SqlLive } from "./Sql/Client.js"

/** Repositories and services over the database named by the config. */
export const ServicesLive = InstanceAccessLive.pipe(
  Layer.provideMerge(Layer.mergeAll(TokensRepoLive, InstancesRepoLive)),
  Layer.provideMerge(AccessTokenCipherLive),
  Layer.provideMerge(SqlLive)
)

const ApiLive = HttpApiBuilder.api(HubApi).pipe(
  Layer.provide([HealthHttpLive, AuthHttpLive, InstancesHttpLive]),
  Layer.provide(AuthenticationLive),
  Layer.provide(TokenResolverLive)
)

/** The server bound to HOST and PORT from the config. */
export const ServerLive = Layer.unwrapEffect(
  Effect.map(HubConfig, (config) => BunHttpServer.layer({ port: config.port, hostname: config.host }))
)

/** Serves the hub on whatever HttpServer is provided (ServerLive, or port 0 in tests). */
export const HttpLive = HttpApiBuilder.serve(requestLog).pipe(
  Layer.provide(HttpApiSwagger.layer({ path: "/docs" })),
  Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
  Layer.provide(ErrorResponseLive),
  Layer.provide(ApiLive),
  HttpServer.withLogAddress
)

/** The whole hub on the given HttpServer layer, exposing its services and server (tests use them). */
export const hubLayer = <ROut, E, R>(server: Layer.Layer<ROut, E, R>) =>
  HttpLive.pipe(Layer.provideMerge(server), Layer.provideMerge(ServicesLive))

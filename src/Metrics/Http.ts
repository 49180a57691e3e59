import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { NotFound, Unauthorized } from "../Domain/Errors.js"
import { MetricsAuthorization } from "./Api.js"
import { Metrics } from "./Metrics.js"

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** Compared as SHA-256 digests: equal lengths, so timingSafeEqual takes as long whatever the offered token. */
const digest = (text: string) => createHash("sha256").update(text).digest()

/** HUB_METRICS_TOKEN, when set, as a Bearer token compared in constant time; no token needed otherwise. */
const MetricsAuthorizationLive = Layer.effect(
  MetricsAuthorization,
  Effect.map(HubConfig, (config) => {
    const expected = Option.map(config.metricsToken, (token) => digest(Redacted.value(token)))
    const admits = (authorization: string | undefined, wanted: Buffer) => {
      const offered = BEARER.exec(authorization ?? "")?.[1]
      return offered !== undefined && timingSafeEqual(digest(offered), wanted)
    }
    return MetricsAuthorization.of({
      metricsToken: () =>
        Option.match(expected, {
          onNone: () => Effect.void,
          onSome: (wanted) =>
            Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
              admits(request.headers.authorization, wanted) ? Effect.void : Effect.fail(new Unauthorized()))
        })
    })
  })
)

export const MetricsHttpLive = HttpApiBuilder.group(HubApi, "metrics", (handlers) =>
  Effect.gen(function*() {
    const metrics = yield* Metrics
    const off = new NotFound({ message: "This hub keeps no metrics (HUB_METRICS=false)", error: "metrics_disabled" })
    return handlers.handle("metrics", () =>
      metrics.enabled
        ? Effect.map(metrics.scrape, (text) => HttpServerResponse.text(text, { contentType: metrics.contentType }))
        : Effect.fail(off))
  })).pipe(Layer.provide(MetricsAuthorizationLive))

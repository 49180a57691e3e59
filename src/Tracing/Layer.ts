/**
 * Trace export: with OTEL_EXPORTER_OTLP_ENDPOINT set, the hub's spans go to the collector over
 * OTLP/HTTP JSON (@effect/opentelemetry's OtlpTracer, over fetch: no OpenTelemetry SDK is loaded);
 * unset, no tracer is installed and Effect's spans are turned off, so tracing costs nothing.
 */
import { OtlpSerialization, OtlpTracer } from "@effect/opentelemetry"
import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer, Option, Redacted } from "effect"
import { HubConfig } from "../Config.js"
import type { TracingSettings } from "./Settings.js"
import { HubTracer } from "./Spans.js"

/** The OTLP exporter, flushed when the scope closes (the hub's last step, after every span has ended). */
const otlpTracer = (settings: TracingSettings) =>
  OtlpTracer.make({
    url: settings.tracesUrl,
    // OTEL_RESOURCE_ATTRIBUTES (service.instance.id for a replica, say) is read by the exporter itself.
    resource: { serviceName: settings.serviceName },
    headers: Redacted.value(settings.headers),
    exportInterval: settings.exportInterval
  }).pipe(Effect.provide([FetchHttpClient.layer, OtlpSerialization.layerJson]))

/** `layer` with the tracer the config asks for: the OTLP exporter for both Effect's spans and the plain paths', or none. */
export const withTracing = <A, E, R>(layer: Layer.Layer<A, E, R>): Layer.Layer<A, E, R | HubConfig> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const { tracing } = yield* HubConfig
    if (Option.isNone(tracing)) {
      // No exporter: spans would only cost time on every request (clock reads, attributes).
      return Layer.provide(layer, Layer.setTracerEnabled(false))
    }
    const tracer = yield* otlpTracer(tracing.value)
    return layer.pipe(Layer.provide(Layer.succeed(HubTracer, tracer)), Layer.provide(Layer.setTracer(tracer)))
  }))

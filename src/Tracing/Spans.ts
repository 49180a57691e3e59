/**
 * Spans for the hub's paths that are plain async code rather than effects (the fast lane, the send,
 * the Graph send, the delivery attempt): made with the tracer's own API, and only when tracing is on.
 * Off, HubTracer is undefined and a path's whole cost is that one test: no cost showed in alternating
 * runs. On, a span costs about 10 µs of CPU, export included (scripts/bench/span-cost.ts), about 30 µs a
 * send and 20 µs a delivery (docs/PERFORMANCE.md, "Tracing", 2026-11-27).
 * Attributes are ids, counts and status codes: never a secret, a token or a message's body.
 */
import { Context, Exit, Option, Tracer } from "effect"

/** The tracer that exports to OTEL_EXPORTER_OTLP_ENDPOINT (Tracing/Layer.ts); undefined when tracing is off. */
export class HubTracer extends Context.Reference<HubTracer>()("HubTracer", {
  defaultValue: (): Tracer.Tracer | undefined => undefined
}) {}

/** Wall-clock time in nanoseconds, as spans take it (microsecond precision). */
const nowNanos = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1_000)) * 1_000n

/** Sets the attributes given a value (an undefined one is left out). */
export const annotate = (span: Tracer.Span, attributes: Readonly<Record<string, unknown>>) => {
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) span.attribute(key, value)
  }
}

/** Starts a span under `parent` (a new trace without one). */
export const startSpan = (
  tracer: Tracer.Tracer,
  name: string,
  parent: Tracer.AnySpan | undefined,
  kind: Tracer.SpanKind,
  attributes: Readonly<Record<string, unknown>> = {}
): Tracer.Span => {
  const span = tracer.span(name, Option.fromNullable(parent), Context.empty(), [], nowNanos(), kind)
  annotate(span, attributes)
  return span
}

/** Why a span ended in error, as its status and exception event say (a short message naming no secret). */
class SpanFailure extends Error {
  override readonly name = "Failure"
}

/** Ends a span, in error when `failure` says why. */
export const endSpan = (span: Tracer.Span, failure?: string) =>
  span.end(nowNanos(), failure === undefined ? Exit.void : Exit.fail(new SpanFailure(failure)))

/** The W3C `traceparent` of a span (version 00, sampled): what is kept with an event for its deliveries. */
export const traceparentOf = (span: Tracer.AnySpan) => `00-${span.traceId}-${span.spanId}-01`

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The span a W3C `traceparent` names; undefined when absent or malformed (the all-zero ids are invalid). */
export const parentOf = (traceparent: string | null | undefined): Tracer.ExternalSpan | undefined => {
  const match = TRACEPARENT.exec(traceparent?.trim() ?? "")
  if (match === null || match[1] === undefined || match[2] === undefined || match[3] === undefined) return undefined
  if (/^0+$/.test(match[1]) || /^0+$/.test(match[2])) return undefined
  return Tracer.externalSpan({
    traceId: match[1],
    spanId: match[2],
    sampled: (Number.parseInt(match[3], 16) & 1) === 1
  })
}

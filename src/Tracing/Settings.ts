/**
 * The tracing settings, OpenTelemetry's own variables: OTEL_EXPORTER_OTLP_ENDPOINT turns export on
 * (traces go to `<endpoint>/v1/traces` over OTLP/HTTP JSON), OTEL_SERVICE_NAME names the service,
 * OTEL_EXPORTER_OTLP_HEADERS adds headers (a collector's API key: kept redacted), and
 * OTEL_BSP_SCHEDULE_DELAY is how often spans are sent. Given empty, each is as if unset (Config.ts).
 */
import { Config, ConfigError, Duration, Either, Option, Redacted } from "effect"

export interface TracingSettings {
  /** Where spans are posted: the endpoint's `/v1/traces`. */
  readonly tracesUrl: string
  readonly serviceName: string
  /** Headers sent with each export (`key=value,…`, values URL-encoded as OpenTelemetry writes them). */
  readonly headers: Redacted.Redacted<Readonly<Record<string, string>>>
  /** How long spans wait to be sent together. */
  readonly exportInterval: Duration.Duration
}

const invalid = (name: string, expected: string) =>
  ConfigError.InvalidData([name], `Expected ${name} to be ${expected}`)

/** `key1=value1,key2=value2` (OpenTelemetry's form for OTEL_EXPORTER_OTLP_HEADERS); undefined if malformed. */
const parseOtlpHeaders = (text: string): Record<string, string> | undefined => {
  const headers: Record<string, string> = {}
  for (const part of text.split(",")) {
    if (part.trim() === "") continue
    const at = part.indexOf("=")
    const name = part.slice(0, at).trim()
    if (at <= 0 || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) return undefined
    try {
      headers[name.toLowerCase()] = decodeURIComponent(part.slice(at + 1).trim())
    } catch {
      return undefined
    }
  }
  return headers
}

const endpoint = Config.option(Config.string("OTEL_EXPORTER_OTLP_ENDPOINT")).pipe(
  Config.validate({
    message: "Expected OTEL_EXPORTER_OTLP_ENDPOINT to be an http(s) URL such as http://localhost:4318",
    validation: (url) => Option.isNone(url) || (URL.canParse(url.value) && /^https?:/i.test(url.value))
  })
)

const headers = Config.string("OTEL_EXPORTER_OTLP_HEADERS").pipe(
  Config.withDefault(""),
  Config.mapOrFail((text) => {
    const parsed = parseOtlpHeaders(text)
    return parsed === undefined
      ? Either.left(invalid("OTEL_EXPORTER_OTLP_HEADERS", "a list such as key1=value1,key2=value2"))
      : Either.right(Redacted.make<Readonly<Record<string, string>>>(parsed))
  })
)

const exportInterval = Config.integer("OTEL_BSP_SCHEDULE_DELAY").pipe(
  Config.withDefault(5_000),
  Config.validate({
    message: "Expected OTEL_BSP_SCHEDULE_DELAY to be a whole number of milliseconds of at least 1",
    validation: (n) => n >= 1
  }),
  Config.map(Duration.millis)
)

/** The tracing settings; none (tracing off) without OTEL_EXPORTER_OTLP_ENDPOINT. */
export const tracingSettings: Config.Config<Option.Option<TracingSettings>> = Config.all({
  endpoint,
  serviceName: Config.string("OTEL_SERVICE_NAME").pipe(Config.withDefault("messaging-hub")),
  headers,
  exportInterval
}).pipe(
  Config.map(({ endpoint, ...rest }) =>
    Option.map(endpoint, (url) => ({ tracesUrl: `${url.replace(/\/+$/, "")}/v1/traces`, ...rest }))
  )
)

/**
 * Every setting of the hub, read from the environment once at start and validated there:
 * a bad value stops the hub with a message naming the variable and what it expects.
 */
import { Config, ConfigError, Context, Duration, Either, Effect, Layer, LogLevel, Option, Redacted } from "effect"

export type UpstreamMode = "sandbox" | "graph"
export type LogFormat = "pretty" | "json"

export interface HubSettings {
  readonly port: number
  readonly host: string
  readonly databaseFile: string
  readonly upstream: UpstreamMode
  readonly graphUrl: string
  readonly appSecret: Option.Option<Redacted.Redacted<string>>
  readonly verifyToken: Option.Option<Redacted.Redacted<string>>
  /** 32-byte key for AES-256-GCM; absent means "generate and keep one" (sandbox only). */
  readonly secretKey: Option.Option<Redacted.Redacted<Uint8Array>>
  readonly webhookTimeout: Duration.Duration
  readonly webhookRetry: ReadonlyArray<Duration.Duration>
  readonly webhookAllowPrivate: boolean
  readonly sendRatePerSecond: number
  readonly sessionTtl: Duration.Duration
  readonly logLevel: LogLevel.LogLevel
  readonly logFormat: LogFormat
}

export class HubConfig extends Context.Tag("HubConfig")<HubConfig, HubSettings>() {}

const DEFAULT_RETRY = "5s,30s,2m,10m,30m,1h,3h,6h,12h,24h"

/** Parses "32 bytes, as 64 hex characters or base64". */
export const parseSecretKey = (text: string): Either.Either<Uint8Array, string> => {
  const trimmed = text.trim()
  if (/^[0-9a-fA-F]{64}$/.test(trimmed)) return Either.right(Uint8Array.from(Buffer.from(trimmed, "hex")))
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(trimmed)) {
    const bytes = Buffer.from(trimmed, "base64")
    if (bytes.length === 32) return Either.right(Uint8Array.from(bytes))
  }
  return Either.left("32 bytes written as 64 hex characters or base64")
}

/** Parses durations such as `500ms`, `5s`, `2m`, `1h`, `1d`, or a bare number of milliseconds. */
export const parseDuration = (text: string): Option.Option<Duration.Duration> => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text)
  if (match === null) return Option.none()
  const amount = Number(match[1])
  switch (match[2]) {
    case "s":
      return Option.some(Duration.seconds(amount))
    case "m":
      return Option.some(Duration.minutes(amount))
    case "h":
      return Option.some(Duration.hours(amount))
    case "d":
      return Option.some(Duration.days(amount))
    default:
      return Option.some(Duration.millis(amount))
  }
}

const invalid = (name: string, expected: string) => ConfigError.InvalidData([name], `Expected ${name} to be ${expected}`)

const secretKey = Config.option(Config.redacted("HUB_SECRET_KEY")).pipe(
  Config.mapOrFail(Option.match({
    onNone: () => Either.right(Option.none<Redacted.Redacted<Uint8Array>>()),
    onSome: (value) =>
      Either.mapBoth(parseSecretKey(Redacted.value(value)), {
        onLeft: (expected) => invalid("HUB_SECRET_KEY", expected),
        onRight: (bytes) => Option.some(Redacted.make(bytes))
      })
  }))
)

const duration = (name: string, fallback: string) =>
  Config.string(name).pipe(
    Config.withDefault(fallback),
    Config.mapOrFail((text) =>
      Option.match(parseDuration(text), {
        onNone: () => Either.left(invalid(name, "a duration such as 500ms, 20s, 5m, 12h")),
        onSome: Either.right
      })
    )
  )

const webhookRetry = Config.string("HUB_WEBHOOK_RETRY").pipe(
  Config.withDefault(DEFAULT_RETRY),
  Config.mapOrFail((text) => {
    const parts = text.split(",").map(parseDuration)
    const delays = parts.flatMap((part) => Option.toArray(part))
    return delays.length === parts.length && delays.length > 0
      ? Either.right(delays)
      : Either.left(invalid("HUB_WEBHOOK_RETRY", "a comma list of delays such as 1s,5s,30s"))
  })
)

const webhookTimeout = Config.integer("HUB_WEBHOOK_TIMEOUT_MS").pipe(
  Config.withDefault(20_000),
  Config.validate({ message: "Expected HUB_WEBHOOK_TIMEOUT_MS to be a positive number of milliseconds", validation: (n) => n > 0 }),
  Config.map(Duration.millis)
)

const port = Config.integer("PORT").pipe(
  Config.withDefault(3000),
  Config.validate({ message: "Expected PORT to be a port number from 0 to 65535", validation: (n) => n >= 0 && n <= 65535 })
)

const sendRate = Config.integer("HUB_SEND_RATE").pipe(
  Config.withDefault(80),
  Config.validate({ message: "Expected HUB_SEND_RATE to be a whole number of messages per second from 1 to 1000", validation: (n) => n >= 1 && n <= 1000 })
)

const graphUrl = Config.string("HUB_GRAPH_URL").pipe(
  Config.withDefault("https://graph.facebook.com/v23.0"),
  Config.validate({ message: "Expected HUB_GRAPH_URL to be an http(s) URL", validation: (url) => URL.canParse(url) && /^https?:/.test(url) }),
  Config.map((url) => url.replace(/\/+$/, ""))
)

export const hubSettings: Config.Config<HubSettings> = Config.all({
  port,
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseFile: Config.string("HUB_DB").pipe(Config.withDefault("./data/hub.sqlite")),
  upstream: Config.literal("sandbox", "graph")("HUB_UPSTREAM").pipe(Config.withDefault<UpstreamMode>("sandbox")),
  graphUrl,
  appSecret: Config.option(Config.redacted("HUB_APP_SECRET")),
  verifyToken: Config.option(Config.redacted("HUB_VERIFY_TOKEN")),
  secretKey,
  webhookTimeout,
  webhookRetry,
  webhookAllowPrivate: Config.boolean("HUB_WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  sendRatePerSecond: sendRate,
  sessionTtl: duration("HUB_SESSION_TTL", "12h"),
  logLevel: Config.logLevel("HUB_LOG_LEVEL").pipe(Config.withDefault(LogLevel.Info)),
  logFormat: Config.literal("pretty", "json")("HUB_LOG_FORMAT").pipe(Config.withDefault<LogFormat>("pretty"))
})

/** Reads the settings from the current ConfigProvider (the environment by default). */
export const HubConfigLive = Layer.effect(HubConfig, hubSettings)

/** Settings for tests and embedding: defaults overridden by the given values. */
export const hubConfigWith = (overrides: Partial<HubSettings>) =>
  Layer.effect(HubConfig, Effect.map(hubSettings, (settings) => ({ ...settings, ...overrides })))

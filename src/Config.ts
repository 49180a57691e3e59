/**
 * Every setting of the hub, read from the environment once at start and validated there:
 * a bad value stops the hub with a message naming the variable and what it expects.
 */
import {
  Config,
  ConfigError,
  ConfigProvider,
  Context,
  Duration,
  Effect,
  Either,
  Layer,
  LogLevel,
  Option,
  Redacted
} from "effect"
import { type TracingSettings, tracingSettings } from "./Tracing/Settings.js"

export type UpstreamMode = "sandbox" | "graph"
export type LogFormat = "pretty" | "json"

export interface HubSettings {
  readonly port: number
  readonly host: string
  /** HUB_DB: a SQLite file (`:memory:` in tests), or a `postgres://` / `postgresql://` URL (see databaseEngine). */
  readonly databaseFile: string
  /** Connections to PostgreSQL per process (HUB_DB_POOL_SIZE); SQLite always has one. */
  readonly databasePoolSize: number
  readonly upstream: UpstreamMode
  readonly graphUrl: string
  readonly appSecret: Option.Option<Redacted.Redacted<string>>
  readonly verifyToken: Option.Option<Redacted.Redacted<string>>
  /** 32-byte key for AES-256-GCM; absent means "generate and keep one" (sandbox only). */
  readonly secretKey: Option.Option<Redacted.Redacted<Uint8Array>>
  readonly webhookTimeout: Duration.Duration
  readonly webhookRetry: ReadonlyArray<Duration.Duration>
  readonly webhookAllowPrivate: boolean
  /** How long finished deliveries, their attempts, events and unrouted changes are kept. */
  readonly retention: Duration.Duration
  /** Deliveries in flight at once, overall and per webhook. */
  readonly dispatchConcurrency: number
  readonly dispatchPerWebhook: number
  /**
   * Deliveries in flight at once per organization while slots are scarce, so one organization's slow
   * receivers cannot hold every slot; past it, idle slots up to three quarters of the concurrency.
   */
  readonly dispatchPerOrganization: number
  /** Connections open at once to one origin (a webhook receiver, the Graph API); past it requests wait their turn. */
  readonly maxConnectionsPerOrigin: number
  /** On shutdown, how long in-flight deliveries may finish before the rest are released. */
  readonly dispatchDrainTimeout: Duration.Duration
  /** On SIGTERM, how long the hub keeps serving (with /ready answering 503) before it begins to stop. */
  readonly shutdownDelay: Duration.Duration
  /** A lease lasts the webhook timeout plus this; then another process may take the row (crash recovery). */
  readonly dispatchLeaseMargin: Duration.Duration
  /** A webhook failing without a single success for this long is disabled. */
  readonly webhookDisableAfter: Duration.Duration
  /** Most webhooks an instance may have (inactive ones count; deleted ones do not). */
  readonly webhooksPerInstance: number
  /** Most stored events one replay call walks (HUB_REPLAY_MAX); a cursor goes on from there. */
  readonly replayMax: number
  /** HUB_SEND_RATE: messages per second no number exceeds, below its live throughput level; undefined: the level alone. */
  readonly sendRateCap: number | undefined
  /** How long a queued send may wait for its turn when the request gives no `validity` (HUB_QUEUE_VALIDITY). */
  readonly queueValidity: Duration.Duration
  /** A number's queue holds at most this many hours of its throughput (HUB_QUEUE_MAX_HOURS). */
  readonly queueMaxHours: number
  /** Upstream posts waiting for their commit beyond which new posts are refused with 503 (backpressure). */
  readonly ingressMaxPending: number
  /** Sends in flight beyond which new sends are refused with 503 (backpressure). */
  readonly sendMaxInFlight: number
  /** Sends in flight of one organization beyond which its new sends are refused with 503 (one tenant cannot take them all). */
  readonly sendMaxInFlightPerOrganization: number
  /**
   * Bytes held at once, over all of them, by upstream posts whose signature is not yet checked;
   * past it a new post is answered 503 with Retry-After before its body is read.
   */
  readonly ingressUnverifiedMaxBytes: number
  /** Open live event streams (GET /api/events/stream) per token, and per organization; beyond them 429. */
  readonly streamsPerToken: number
  readonly streamsPerOrganization: number
  /** Media downloads streaming at once per organization; beyond it they wait their turn. */
  readonly mediaDownloadsPerOrganization: number
  readonly sessionTtl: Duration.Duration
  /** Total time for one Graph call (connect, answer and body); uploads use graphUploadTimeout. */
  readonly graphTimeout: Duration.Duration
  readonly graphUploadTimeout: Duration.Duration
  /** First delay of the retry schedule for Graph reads (exponential with jitter, 3 tries). */
  readonly graphRetryBase: Duration.Duration
  /** How long a sandbox template stays PENDING before it is APPROVED. */
  readonly sandboxApprovalDelay: Duration.Duration
  /** Delay before each sandbox status event (sent, delivered, read) after an accepted send. */
  readonly sandboxStatusDelay: Duration.Duration
  readonly logLevel: LogLevel.LogLevel
  readonly logFormat: LogFormat
  /** Resident memory above which the hub collects garbage early (MemoryTarget.ts); 0 turns that off. */
  readonly memoryTargetMb: number
  /** Whether the hub keeps metrics and serves them at GET /metrics (false: no observation is made at all). */
  readonly metrics: boolean
  /** When set, GET /metrics needs `Authorization: Bearer <this>`; otherwise it is open. */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /** OpenTelemetry trace export (OTEL_EXPORTER_OTLP_ENDPOINT and the rest: Tracing/Settings.ts); none: off. */
  readonly tracing: Option.Option<TracingSettings>
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

/** The engine HUB_DB names: a postgres:// or postgresql:// URL selects PostgreSQL, anything else is a SQLite file. */
export const databaseEngine = (
  hubDb: string
): "postgres" | "sqlite" => (/^postgres(ql)?:\/\//i.test(hubDb) ? "postgres" : "sqlite")

const invalid = (name: string, expected: string) =>
  ConfigError.InvalidData([name], `Expected ${name} to be ${expected}`)

/**
 * The settings that hold a secret. One given empty or blank (what an unset variable of a compose file
 * yields) is an error naming it, never "set": an empty app secret would verify posts signed with the
 * empty key, an empty metrics token would leave /metrics open while the operator believes it closed.
 */
export const SECRET_SETTINGS = ["HUB_APP_SECRET", "HUB_VERIFY_TOKEN", "HUB_METRICS_TOKEN", "HUB_SECRET_KEY"] as const

const isBlank = (text: string) => text.trim() === ""

/** An optional secret: absent, or a value that is not blank. */
const optionalSecret = (name: (typeof SECRET_SETTINGS)[number]) =>
  Config.option(Config.redacted(name)).pipe(
    Config.mapOrFail((value) =>
      Option.isSome(value) && isBlank(Redacted.value(value.value))
        ? Either.left(
          invalid(name, "a non-empty secret: it is set but empty or blank (unset it, or give it its value)")
        )
        : Either.right(value)
    )
  )

/**
 * The environment as the settings read it: a variable given empty or blank is as if unset (its default
 * applies), except the secrets, which `optionalSecret` refuses when blank.
 */
const hubEnvironment = (env: Readonly<Record<string, string | undefined>>): ConfigProvider.ConfigProvider => {
  const secrets: ReadonlySet<string> = new Set(SECRET_SETTINGS)
  const entries = Object.entries(env).flatMap(([name, value]): ReadonlyArray<[string, string]> =>
    value === undefined || (isBlank(value) && !secrets.has(name)) ? [] : [[name, value]]
  )
  return ConfigProvider.fromMap(new Map(entries), { pathDelim: "_", seqDelim: "," })
}

const secretKey = optionalSecret("HUB_SECRET_KEY").pipe(
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
  Config.validate({
    message: "Expected HUB_WEBHOOK_TIMEOUT_MS to be a positive number of milliseconds",
    validation: (n) => n > 0
  }),
  Config.map(Duration.millis)
)

const positiveInteger = (name: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.withDefault(fallback),
    Config.validate({ message: `Expected ${name} to be a whole number of at least 1`, validation: (n) => n >= 1 })
  )

const port = Config.integer("PORT").pipe(
  Config.withDefault(3000),
  Config.validate({
    message: "Expected PORT to be a port number from 0 to 65535",
    validation: (n) => n >= 0 && n <= 65535
  })
)

/** An optional cap below every number's live throughput level (PhoneNumbers/Throughput.ts); unset, the level alone. */
const sendRateCap = Config.option(Config.integer("HUB_SEND_RATE")).pipe(
  Config.validate({
    message: "Expected HUB_SEND_RATE to be a whole number of messages per second from 1 to 1000",
    validation: (n) => Option.isNone(n) || (n.value >= 1 && n.value <= 1000)
  }),
  Config.map(Option.getOrUndefined)
)

const memoryTarget = Config.integer("HUB_MEMORY_TARGET_MB").pipe(
  Config.withDefault(200),
  Config.validate({
    message: "Expected HUB_MEMORY_TARGET_MB to be a whole number of megabytes, or 0 for no target",
    validation: (n) => n >= 0
  })
)

const graphUrl = Config.string("HUB_GRAPH_URL").pipe(
  // v23.0 ends 2027-10-08 (Upstream/GraphVersion.ts has the table the start-up warning reads).
  Config.withDefault("https://graph.facebook.com/v25.0"),
  Config.validate({
    message: "Expected HUB_GRAPH_URL to be an http(s) URL",
    validation: (url) => URL.canParse(url) && /^https?:/.test(url)
  }),
  Config.map((url) => url.replace(/\/+$/, ""))
)

/** Other names most tools use for Effect's levels. */
const LEVEL_ALIASES: Readonly<Record<string, string>> = { warn: "warning" }

/** The log level names, the same as the command line's `--log-level` (Effect's own: LogLevel.allLevels). */
const LOG_LEVEL_NAMES: ReadonlyArray<string> = [
  ...LogLevel.allLevels.map((level) => level._tag.toLowerCase()),
  ...Object.keys(LEVEL_ALIASES)
]

/** The level a name means (Effect's own names, or `warn`), case-insensitive. */
const logLevelNamed = (text: string): LogLevel.LogLevel | undefined => {
  const name = text.trim().toLowerCase()
  const canonical = LEVEL_ALIASES[name] ?? name
  return LogLevel.allLevels.find((candidate) => candidate._tag.toLowerCase() === canonical)
}

const logLevel = Config.string("HUB_LOG_LEVEL").pipe(
  Config.withDefault("info"),
  Config.mapOrFail((text) => {
    const level = logLevelNamed(text)
    return level === undefined
      ? Either.left(invalid("HUB_LOG_LEVEL", `one of ${LOG_LEVEL_NAMES.join(", ")}`))
      : Either.right(level)
  })
)

const metricsToken = optionalSecret("HUB_METRICS_TOKEN")

export const hubSettings: Config.Config<HubSettings> = Config.all({
  port,
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseFile: Config.string("HUB_DB").pipe(
    Config.withDefault("./data/hub.sqlite"),
    Config.validate({
      message: "Expected HUB_DB to be a SQLite file path or a postgres://user:password@host:port/database URL",
      validation: (text) => text.trim() !== "" && (databaseEngine(text) === "sqlite" || URL.canParse(text))
    })
  ),
  databasePoolSize: Config.integer("HUB_DB_POOL_SIZE").pipe(
    Config.withDefault(10),
    Config.validate({
      message: "Expected HUB_DB_POOL_SIZE to be a whole number of connections from 2 to 1000",
      validation: (n) => n >= 2 && n <= 1000
    })
  ),
  upstream: Config.literal("sandbox", "graph")("HUB_UPSTREAM").pipe(Config.withDefault<UpstreamMode>("sandbox")),
  graphUrl,
  appSecret: optionalSecret("HUB_APP_SECRET"),
  verifyToken: optionalSecret("HUB_VERIFY_TOKEN"),
  secretKey,
  webhookTimeout,
  webhookRetry,
  webhookAllowPrivate: Config.boolean("HUB_WEBHOOK_ALLOW_PRIVATE").pipe(Config.withDefault(false)),
  // One busy number makes about 3,000 status events/s (1,000 sends/s); at a receiver's 10 ms a
  // webhook needs about 30 attempts in flight to keep up, and several busy numbers share the total.
  dispatchConcurrency: positiveInteger("HUB_DISPATCH_CONCURRENCY", 256),
  dispatchPerWebhook: positiveInteger("HUB_DISPATCH_PER_WEBHOOK", 32),
  // Half the slots: an organization whose receivers all hang at the timeout leaves the other half to the rest.
  dispatchPerOrganization: positiveInteger("HUB_DISPATCH_PER_ORGANIZATION", 128),
  maxConnectionsPerOrigin: positiveInteger("HUB_MAX_CONNECTIONS_PER_ORIGIN", 256),
  dispatchDrainTimeout: duration("HUB_DISPATCH_DRAIN_TIMEOUT", "10s"),
  dispatchLeaseMargin: duration("HUB_DISPATCH_LEASE_MARGIN", "30s"),
  shutdownDelay: duration("HUB_SHUTDOWN_DELAY", "0s"),
  webhookDisableAfter: duration("HUB_WEBHOOK_DISABLE_AFTER", "5d"),
  webhooksPerInstance: positiveInteger("HUB_WEBHOOKS_PER_INSTANCE", 10),
  replayMax: positiveInteger("HUB_REPLAY_MAX", 100_000),
  retention: duration("HUB_RETENTION", "30d"),
  sendRateCap,
  // Twilio's WhatsApp queue and Telnyx's both hold four hours of a sender's traffic.
  queueValidity: duration("HUB_QUEUE_VALIDITY", "4h"),
  queueMaxHours: Config.number("HUB_QUEUE_MAX_HOURS").pipe(
    Config.withDefault(4),
    Config.validate({
      message: "Expected HUB_QUEUE_MAX_HOURS to be a number of hours above 0 (such as 4, or 0.5)",
      validation: (n) => n > 0 && Number.isFinite(n)
    })
  ),
  // A group commits up to 256 posts; 2,000 waiting is several groups behind, about 0.25 s of the
  // hub's overload rate: past it the upstream is better told to retry (it does, on any non-200).
  ingressMaxPending: positiveInteger("HUB_INGRESS_MAX_PENDING", 2_000),
  // At a Graph latency of 0.3 s, 1,000 sends in flight is over 3,000 sends/s.
  sendMaxInFlight: positiveInteger("HUB_SEND_MAX_IN_FLIGHT", 1_000),
  // Half of the global bound: one organization's slow Graph calls leave the other half to the rest.
  sendMaxInFlightPerOrganization: positiveInteger("HUB_SEND_MAX_IN_FLIGHT_PER_ORGANIZATION", 500),
  // 8 posts of the 8 MiB limit; Meta's posts are a few KiB, so this only binds on what is not Meta.
  ingressUnverifiedMaxBytes: Config.integer("HUB_INGRESS_UNVERIFIED_MB").pipe(
    Config.withDefault(64),
    Config.validate({
      message: "Expected HUB_INGRESS_UNVERIFIED_MB to be a whole number of megabytes of at least 8 (one post's limit)",
      validation: (n) => n >= 8
    }),
    Config.map((mb) => mb * 1024 * 1024)
  ),
  streamsPerToken: positiveInteger("HUB_STREAMS_PER_TOKEN", 5),
  streamsPerOrganization: positiveInteger("HUB_STREAMS_PER_ORGANIZATION", 50),
  mediaDownloadsPerOrganization: positiveInteger("HUB_MEDIA_DOWNLOADS_PER_ORGANIZATION", 8),
  sessionTtl: duration("HUB_SESSION_TTL", "12h"),
  graphTimeout: duration("HUB_GRAPH_TIMEOUT", "30s"),
  graphUploadTimeout: duration("HUB_GRAPH_UPLOAD_TIMEOUT", "120s"),
  graphRetryBase: duration("HUB_GRAPH_RETRY_BASE", "250ms"),
  sandboxApprovalDelay: duration("HUB_SANDBOX_APPROVAL_DELAY", "10s"),
  sandboxStatusDelay: duration("HUB_SANDBOX_STATUS_DELAY", "1s"),
  logLevel,
  logFormat: Config.literal("pretty", "json")("HUB_LOG_FORMAT").pipe(Config.withDefault<LogFormat>("pretty")),
  memoryTargetMb: memoryTarget,
  metrics: Config.boolean("HUB_METRICS").pipe(Config.withDefault(true)),
  metricsToken,
  tracing: tracingSettings
}).pipe(
  Config.mapOrFail((settings) => {
    const missing: Array<ConfigError.ConfigError> = []
    // Real access tokens must be encrypted with a key the operator keeps; only a sandbox on SQLite may
    // make its own (kept beside the file): replicas on PostgreSQL must share one key.
    if (Option.isNone(settings.secretKey) && settings.upstream === "graph") {
      missing.push(
        ConfigError.MissingData(
          ["HUB_SECRET_KEY"],
          "Expected HUB_SECRET_KEY (32 bytes as 64 hex characters or base64) when HUB_UPSTREAM=graph"
        )
      )
    } else if (Option.isNone(settings.secretKey) && databaseEngine(settings.databaseFile) === "postgres") {
      missing.push(ConfigError.MissingData(
        ["HUB_SECRET_KEY"],
        "Expected HUB_SECRET_KEY (32 bytes as 64 hex characters or base64) when HUB_DB is a PostgreSQL URL: every replica must use the same key"
      ))
    }
    // Without it anyone could post forged messages and statuses to /upstream/events, fanned out signed.
    if (settings.upstream === "graph" && Option.isNone(settings.appSecret)) {
      missing.push(
        ConfigError.MissingData(
          ["HUB_APP_SECRET"],
          "HUB_APP_SECRET is required when HUB_UPSTREAM=graph (the Meta app secret that signs upstream posts)"
        )
      )
    }
    const [first, ...rest] = missing
    return first === undefined ? Either.right(settings) : Either.left(rest.reduce(ConfigError.And, first))
  })
)

/** Reads the settings from the process's environment (blank values as unset: hubEnvironment). */
export const HubConfigLive = Layer.effect(
  HubConfig,
  Effect.withConfigProvider(hubSettings, hubEnvironment(process.env))
)

/** Settings for tests and embedding: defaults overridden by the given values. */
export const hubConfigWith = (overrides: Partial<HubSettings>) =>
  Layer.effect(HubConfig, Effect.map(hubSettings, (settings) => ({ ...settings, ...overrides })))

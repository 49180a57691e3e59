/**
 * Word between replicas, on PostgreSQL: LISTEN/NOTIFY. A replica announces inside the transaction
 * that makes the news (PostgreSQL delivers a notification only if, and once, that transaction
 * commits, to every listening session, the announcer's own included), and each replica listens on
 * a connection of its own and acts at once. On SQLite there is one process and nothing to tell:
 * announcing runs no statement and listening hears nothing.
 *
 * `PgClient.notify` is not used: it sends `NOTIFY channel, $1`, and PostgreSQL takes no bound
 * parameters in NOTIFY; `SELECT pg_notify($1, $2)` does the same and takes them. Nor is
 * `PgClient.listen`: its connection, once lost (a restart or failover of the server, a terminated
 * backend), is never replaced, and nothing says so. The listener here connects again, a second after
 * it lost its connection, listens again, and tells each subscriber (which then starts its cache
 * over: what was announced meanwhile was missed).
 */
import type { SqlClient, SqlError } from "@effect/sql"
import { Context, Effect, Layer, Redacted, Runtime, type Scope } from "effect"
import pg from "pg"
import { databaseEngine, HubConfig } from "../Config.js"
import { isPostgres } from "./Dialect.js"

/** The channels replicas talk on. */
export const channels = {
  /** Deliveries were queued (not handed to the committing replica's dispatcher), or released: lease them. */
  outbox: "hub_outbox",
  /** A credential was revoked: its token hash is the payload; forget it. */
  credentials: "hub_credentials"
} as const

export type Channel = (typeof channels)[keyof typeof channels]

/** Tells every replica `payload` (non-empty, at most 8,000 bytes) once the current transaction commits; nothing on SQLite. */
export const announce = (
  sql: SqlClient.SqlClient,
  channel: Channel,
  payload: string
): Effect.Effect<void, SqlError.SqlError> =>
  isPostgres(sql) ? Effect.asVoid(sql`SELECT pg_notify(${channel}, ${payload})`) : Effect.void

interface Subscriber {
  readonly channel: Channel
  readonly onPayload: (payload: string) => void
  readonly onConnected: () => void
}

/** This replica's listening connection (pgListenerLayer); on SQLite, `PgListener.None`, which hears nothing. */
export class PgListener extends Context.Tag("PgListener")<PgListener, {
  readonly add: (subscriber: Subscriber) => Effect.Effect<void, never, Scope.Scope>
}>() {
  /** No other replica to hear (SQLite: one process): a subscriber is never called. */
  static readonly None = Layer.succeed(this, { add: () => Effect.void })
}

/** How long after losing its connection the listener connects again. */
const RECONNECT_AFTER_MS = 1000

/** One listening connection to the database at `url`, kept up while the layer lives. */
export const pgListenerLayer = (url: Redacted.Redacted<string>) =>
  Layer.scoped(
    PgListener,
    Effect.gen(function*() {
      const runFork = Runtime.runFork(yield* Effect.runtime<never>())
      const subscribers = new Set<Subscriber>()
      let client: pg.Client | undefined
      let closed = false
      let retry: ReturnType<typeof setTimeout> | undefined

      const listenOn = (connected: pg.Client, channel: Channel) =>
        connected.query(`LISTEN ${pg.escapeIdentifier(channel)}`)

      const connect = () => {
        retry = undefined
        if (closed) return
        const next = new pg.Client({
          connectionString: Redacted.value(url),
          application_name: "messaging-hub listener",
          keepAlive: true
        })
        let lost = false
        const lose = (reason: unknown) => {
          if (lost) return
          lost = true
          if (client === next) client = undefined
          next.end().catch(() => undefined)
          if (closed) return
          runFork(
            Effect.logWarning("The connection listening for other replicas was lost; connecting again", {
              reason: String(reason)
            })
          )
          retry = setTimeout(connect, RECONNECT_AFTER_MS)
        }
        next.on("error", lose)
        next.on("end", () => lose("the connection ended"))
        next.on("notification", (message) => {
          if (message.payload === undefined) return
          for (const subscriber of subscribers) {
            if (subscriber.channel === message.channel) subscriber.onPayload(message.payload)
          }
        })
        next.connect()
          .then(() =>
            Promise.all([...new Set([...subscribers].map((s) => s.channel))].map((channel) => listenOn(next, channel)))
          )
          .then(() => {
            if (lost) return
            if (closed) return void next.end().catch(() => undefined)
            client = next
            for (const subscriber of subscribers) subscriber.onConnected()
          }, lose)
      }

      yield* Effect.acquireRelease(Effect.sync(connect), () =>
        Effect.promise(async () => {
          closed = true
          clearTimeout(retry)
          await client?.end().catch(() => undefined)
        }))

      return PgListener.of({
        add: (subscriber) =>
          Effect.acquireRelease(
            Effect.promise(async () => {
              subscribers.add(subscriber)
              // Already connected: listen on its channel now; otherwise the connection will.
              if (client !== undefined) {
                await listenOn(client, subscriber.channel).catch(() => undefined)
                subscriber.onConnected()
              }
            }),
            () => Effect.sync(() => subscribers.delete(subscriber))
          )
      })
    })
  )

/**
 * Calls `onPayload` with every announcement on `channel` while the scope lasts; on SQLite, never.
 * `onConnected` runs each time listening (re)starts: announcements made while it was down were
 * missed, so a cache should start over then.
 */
export const subscribe = (
  channel: Channel,
  onPayload: (payload: string) => void,
  onConnected: () => void = () => {}
): Effect.Effect<void, never, PgListener | Scope.Scope> =>
  Effect.flatMap(PgListener, (listener) => listener.add({ channel, onPayload, onConnected }))

/** The listener HUB_DB calls for: a listening connection on PostgreSQL, none on SQLite. */
export const PgListenerLive = Layer.unwrapEffect(
  Effect.map(HubConfig, (config) =>
    databaseEngine(config.databaseFile) === "postgres"
      ? pgListenerLayer(Redacted.make(config.databaseFile))
      : PgListener.None)
)

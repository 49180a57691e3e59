/**
 * Revocations made by other processes on the same database (the CLI, another replica): every
 * revocation appends its token hashes to the `revocations` table in its own transaction (TokensRepo),
 * and each hub process reads the rows after the last sequence it saw about once a second (one read
 * on the primary key) and evicts those hashes from its credential cache. So a revocation holds at
 * once in the process that makes it and within about a second in every other one.
 *
 * On PostgreSQL, sequence numbers are handed out before commit, so a transaction may commit a lower
 * number after a reader has passed it: each read therefore goes REREAD numbers behind the position
 * and evicts only what it has not seen (on PostgreSQL a revocation is also announced to every replica
 * as it commits: Sql/Notify.ts). SQLite commits one writer at a time, so there the window finds nothing new.
 */
import { Context, Duration, Effect, Layer, Schedule, SubscriptionRef } from "effect"
import { TokensRepo } from "./Repo.js"
import { TokenResolver } from "./TokenResolver.js"

export const POLL_INTERVAL = Duration.seconds(1)
/** Feed rows are kept this long: far longer than any cache entry lives (a minute). */
const KEEP_ROWS = Duration.hours(1)
/** How far behind its position a read looks for rows committed late (numbers taken by transactions still open). */
const REREAD = 100
/** Old rows are pruned every this many polls (about ten minutes). */
const PRUNE_EVERY = 600

export class RevocationFeed extends Context.Tag("RevocationFeed")<RevocationFeed, {
  /** Reads the revocations committed since the last read and evicts their hashes; answers how many. */
  readonly poll: Effect.Effect<number>
  /** The last sequence number read: tests and diagnostics wait on its changes. */
  readonly position: SubscriptionRef.SubscriptionRef<number>
}>() {}

export const RevocationFeedLive = Layer.effect(
  RevocationFeed,
  Effect.gen(function*() {
    const repo = yield* TokensRepo
    const resolver = yield* TokenResolver
    // Nothing is cached yet, so earlier revocations need not be read.
    const position = yield* SubscriptionRef.make(yield* repo.lastRevocation)
    let polls = 0

    const prune = Effect.suspend(() =>
      ++polls % PRUNE_EVERY === 0
        ? repo.pruneRevocations(new Date(Date.now() - Duration.toMillis(KEEP_ROWS)).toISOString())
        : Effect.void
    )

    /** The numbers read within the window behind the position. */
    let seen = new Set<number>()

    const poll = Effect.gen(function*() {
      const at = yield* SubscriptionRef.get(position)
      const rows = (yield* repo.revocationsAfter(Math.max(0, at - REREAD))).filter((row) =>
        row.seq > at || !seen.has(row.seq)
      )
      const last = Math.max(at, ...rows.map((row) => row.seq))
      seen = new Set([...seen, ...rows.map((row) => row.seq)].filter((seq) => seq > last - REREAD))
      if (rows.length > 0) yield* resolver.forget(...rows.map((row) => row.token_hash))
      if (last !== at) yield* SubscriptionRef.set(position, last)
      yield* prune
      return rows.length
    }).pipe(Effect.withSpan("RevocationFeed.poll"))

    return RevocationFeed.of({ poll, position })
  })
)

/** Polls the feed about once a second while the server runs; a failed read is logged and tried again. */
const RevocationPollLive = Layer.scopedDiscard(
  Effect.gen(function*() {
    const feed = yield* RevocationFeed
    const once = feed.poll.pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("Reading the revocation feed failed; trying again", cause))
    )
    yield* Effect.forkScoped(Effect.repeat(once, Schedule.spaced(POLL_INTERVAL)))
  })
)

/** The feed and its poll, for the serving hub (operator commands revoke but do not poll). */
export const RevocationFeedServerLive = RevocationPollLive.pipe(Layer.provideMerge(RevocationFeedLive))

/**
 * Group commit. SQLite pays for every commit (each touched page of every index is appended to the
 * WAL again), so writes from concurrent requests are gathered and run by one fiber inside a shared
 * transaction, each write in its own savepoint: a failing write rolls back alone, and every caller
 * is answered only after the shared COMMIT, so "committed" still means durable before the caller
 * goes on. Under light load a batch holds one write and costs what a plain transaction costs.
 *
 * - `runStatement`: a write that is one SQL statement skips its savepoint (SQLite already undoes a
 *   failing statement alone, and the savepoint's two extra statements cost more than the write).
 * - `groupNow`: the hot writes (a send's record and its acceptance; a queued send's record and queue
 *   row) are made through a group writer; a batch hands all items waiting in a group to one multi-row
 *   statement, since each statement has a fixed cost (about 15 µs through @effect/sql) well above a
 *   row's. If that statement fails, the group's items are retried one by one so that only the bad one fails.
 *
 * Callers wait on a plain callback rather than a Deferred and a Queue: this is on every send's path.
 *
 * Two in flight on PostgreSQL (see `MAX_IN_FLIGHT`): the next transaction begins, on another pooled
 * connection, as soon as the previous one has run its writes and sent its COMMIT, so its statements'
 * round trips overlap that COMMIT's flush instead of waiting for it. Each transaction still answers
 * only its own callers, after its own COMMIT.
 */
import { SqlClient, SqlError } from "@effect/sql"
import { Array as Arr, type Cause, Context, Effect, Exit, FiberSet, Layer, Option } from "effect"
import { type HubMetrics, Metrics } from "../Metrics/Metrics.js"
import { isPostgres } from "./Dialect.js"
import { unavailableOf } from "./Unavailable.js"

/** Most jobs per shared transaction: bounds how long other queries wait for the connection. */
const MAX_BATCH = 256

/**
 * How long after a transaction began the next may begin when only gathering writes wait (see
 * `gather`). At 1,000 upstream posts/s, the ingress and the dispatcher each committing every 4-5 ms
 * on their own cost the hub about 15 % more CPU per delivery than one shared commit every 10 ms;
 * 40 ms paced the dispatcher's rounds too much in overload.
 */
const GATHER_MS = 10

/**
 * Transactions of one batcher in flight at once: at most one running its writes, and one more
 * committing. PostgreSQL: 2. The earlier transaction has taken every lock it will hold before the
 * next begins, and its COMMIT waits on no lock (no constraint or trigger of the schema is deferred),
 * so the next may wait on its rows (a change both store, an hourly count both add to) but the
 * earlier never waits on the next's: no deadlock between them, whatever rows each touches. SQLite: 1.
 * It has one writer and the hub one connection, so a second transaction could not begin before the
 * first ends; and a failed COMMIT there leaves the transaction open, to be rolled back before the
 * connection serves another.
 */
const MAX_IN_FLIGHT = { postgres: 2, sqlite: 1 } as const

/** Answers a job's callers once the shared transaction's COMMIT is known (its failure, if any). */
type Settle = (commitFailure: Option.Option<Cause.Cause<SqlError.SqlError>>) => void

/** Told of a write's failure: if the database is unavailable, it ends the transaction the write ran in. */
type NoteFailure = (cause: Cause.Cause<unknown>) => void

interface Job {
  /**
   * Runs the job's write(s) inside the shared transaction, telling `noteFailure` (that transaction's)
   * of each failure; never fails (outcomes are kept for Settle).
   */
  readonly execute: (noteFailure: NoteFailure) => Effect.Effect<Settle>
  /** Answers the job's callers with the shared transaction's failure, without running the write(s). */
  readonly abandon: (failure: Cause.Cause<SqlError.SqlError>) => void
  /** Whether it may wait for the gathering time (see `gather`). */
  readonly gathers: boolean
}

export class WriteBatcher extends Context.Tag("WriteBatcher")<WriteBatcher, {
  /** Runs `write` in the next shared transaction and succeeds once that transaction has committed. */
  readonly run: <A, E>(write: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /**
   * As `run`, for a write that does better in a larger transaction than in a sooner one (the
   * ingress's groups, the dispatcher's rounds): when only such writes wait, the transaction begins
   * GATHER_MS after the previous one began (at once if that was longer ago); any other write
   * begins it sooner. Under load, each shared commit then carries both, with more rows each.
   */
  readonly gather: <A, E>(write: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /** As `run`, for a write that is exactly one SQL statement (atomic by itself, so no savepoint). */
  readonly runStatement: <A, E>(statement: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /**
   * A writer for items that `writeAll` writes together (one answer per item, in order): each call
   * joins the next shared transaction's group, and `resume` gets the item's answer once that
   * transaction has committed. A callback, not an effect: the send core that uses it runs without a
   * fiber (see Messages/Send.ts).
   */
  readonly groupNow: <I, A>(writeAll: WriteAll<I, A>, options?: GroupOptions) => GroupWriter<I, A>
  /**
   * When a write last failed because of the database (Sql/Unavailable.ts: unreachable, full,
   * read-only), in epoch milliseconds; 0 if none has. Readiness reads it: a database that answers
   * reads may still refuse writes.
   */
  readonly lastStorageFailureAt: () => number
}>() {}

/** `gathers`: the group waits for the gathering time as `gather`'s writes do (default: it does not). */
interface GroupOptions {
  readonly gathers?: boolean
}

/** Writes a group's items together: one answer per item, in order. */
type WriteAll<I, A> = (items: ReadonlyArray<I>) => Effect.Effect<ReadonlyArray<A>, SqlError.SqlError>

/** Adds `item` to the next shared transaction's group; `resume` is called once with its outcome. */
export type GroupWriter<I, A> = (item: I, resume: (exit: Exit.Exit<A, SqlError.SqlError>) => void) => void

/** An item's outcome from a group writer, as a promise (for the plain code that writes through one). */
export const written = <I, A>(write: GroupWriter<I, A>, item: I) =>
  new Promise<Exit.Exit<A, SqlError.SqlError>>((resolve) => write(item, resolve))

const settled = <A, E>(
  outcome: Exit.Exit<A, E>,
  commitFailure: Option.Option<Cause.Cause<SqlError.SqlError>>
): Exit.Exit<A, E | SqlError.SqlError> => Option.isSome(commitFailure) ? Exit.failCause(commitFailure.value) : outcome

/**
 * Runs a batch's jobs in one shared transaction, then answers every caller with its COMMIT's outcome.
 * A job failing because the database is unavailable ends the batch: SQLite rolls the whole
 * transaction back on a full disk or an I/O error, and the jobs after it would run outside any
 * transaction, each statement committed alone. So the rest are not run and all are answered the failure.
 * `committing` is called once the jobs have run (the COMMIT or ROLLBACK follows): the next batch may begin.
 */
const commitBatch = (options: {
  readonly sql: SqlClient.SqlClient
  readonly recordCommit: HubMetrics["commit"]
  readonly noteStorageFailure: NoteFailure
  readonly rollbackAfterFailure: boolean
  readonly jobs: ReadonlyArray<Job>
  readonly committing: () => void
}) => {
  const { jobs, sql } = options
  const settles: Array<Settle> = []
  const startedAt = performance.now()
  // This batch's own: a failure in a batch committing meanwhile does not end this one.
  let broken: Option.Option<unknown> = Option.none()
  const noteFailure: NoteFailure = (cause) => {
    const unavailable = unavailableOf(cause)
    if (Option.isNone(unavailable)) return
    options.noteStorageFailure(cause)
    broken = unavailable
  }
  return sql.withTransaction(
    Effect.gen(function*() {
      for (const job of jobs) {
        settles.push(yield* job.execute(noteFailure))
        if (Option.isSome(broken)) {
          return yield* Effect.fail(new SqlError.SqlError({ cause: broken.value, message: "A write failed the batch" }))
        }
      }
    }).pipe(Effect.ensuring(Effect.sync(options.committing)))
  ).pipe(
    Effect.exit,
    // A failed COMMIT (a deferred constraint, a full disk) can leave SQLite's transaction open, and
    // @effect/sql does not roll it back: the next batch could not begin, and a plain write in
    // between would join the doomed transaction. "No transaction is active" is fine here.
    // PostgreSQL ends a transaction whose COMMIT failed itself.
    Effect.tap((committed) =>
      Exit.isFailure(committed) && options.rollbackAfterFailure ? Effect.ignore(sql.unsafe("ROLLBACK")) : Effect.void
    ),
    Effect.map((committed) => {
      options.recordCommit((performance.now() - startedAt) / 1000)
      const failure = Exit.isFailure(committed) ? Option.some(committed.cause) : Option.none()
      if (Option.isSome(failure)) options.noteStorageFailure(failure.value)
      for (const settle of settles) settle(failure)
      // Jobs the transaction never reached (it failed to begin, or a job ended it) get its failure too.
      if (Option.isSome(failure)) { for (const job of jobs.slice(settles.length)) job.abandon(failure.value) }
    }),
    Effect.uninterruptible
  )
}

/** One item of a group writer's group, and the callback its outcome goes to. */
interface GroupMember<I, A> {
  readonly item: I
  readonly resume: (exit: Exit.Exit<A, SqlError.SqlError>) => void
}

/** Each member's item in a savepoint of its own: the fallback when the group's statement failed. */
const writeEach = <I, A>(sql: SqlClient.SqlClient, writeAll: WriteAll<I, A>, taken: ReadonlyArray<GroupMember<I, A>>) =>
  Effect.forEach(
    taken,
    (member) =>
      Effect.exit(
        Effect.flatMap(sql.withTransaction(writeAll([member.item])), (answers) =>
          Option.match(Arr.head(answers), {
            onNone: () => Effect.dieMessage("a write group answered no item"),
            onSome: Effect.succeed
          }))
      )
  )

/** A group writer (see `groupNow`) whose group is one job, handed to `enqueue` when its first item arrives. */
const makeGroupWriter = <I, A>(
  sql: SqlClient.SqlClient,
  enqueue: (job: Job) => void,
  writeAll: WriteAll<I, A>,
  gathers: boolean
): GroupWriter<I, A> => {
  let members: Array<GroupMember<I, A>> = []
  // The group's items in one savepoint; if that fails, each in its own, so only a bad item fails.
  const job: Job = {
    execute: (noteFailure) =>
      Effect.suspend(() => {
        const taken = members
        members = []
        // The answer count is checked inside the savepoint, so a wrong count rolls the rows back too.
        const writeTogether = Effect.flatMap(
          writeAll(taken.map((m) => m.item)),
          (answers) =>
            answers.length === taken.length
              ? Effect.succeed(answers.map(Exit.succeed))
              : Effect.dieMessage("a write group answered too few items")
        )
        return sql.withTransaction(writeTogether).pipe(
          // Each item alone finds out which one is bad; but with the database unavailable none would
          // do better, and on SQLite each would run outside the (rolled back) shared transaction.
          Effect.catchAllCause((cause) =>
            Option.isSome(unavailableOf(cause))
              ? Effect.succeed(taken.map(() => Exit.failCause(cause)))
              : writeEach(sql, writeAll, taken)
          ),
          Effect.map((outcomes) => {
            for (const outcome of outcomes) if (Exit.isFailure(outcome)) noteFailure(outcome.cause)
            return (commitFailure: Option.Option<Cause.Cause<SqlError.SqlError>>) =>
              taken.forEach((member, i) =>
                member.resume(settled(outcomes[i] ?? Exit.die("no outcome for a write"), commitFailure))
              )
          })
        )
      }),
    abandon: (failure) => {
      const taken = members
      members = []
      for (const member of taken) {
        member.resume(Exit.failCause(failure))
      }
    },
    gathers
  }
  return (item: I, resume: (exit: Exit.Exit<A, SqlError.SqlError>) => void) => {
    // The group's job is queued once; items arriving before it runs join it.
    if (members.length === 0) enqueue(job)
    members.push({ item, resume })
  }
}

/** A WriteBatcher whose gathering writes wait `gatherMs` (GATHER_MS in the hub; tests choose). */
export const writeBatcherLayer = (options: { readonly gatherMs: number }) =>
  Layer.scoped(
    WriteBatcher,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const metrics = yield* Metrics
      const runFork = yield* FiberSet.makeRuntime<never>()
      const maxInFlight = isPostgres(sql) ? MAX_IN_FLIGHT.postgres : MAX_IN_FLIGHT.sqlite
      let waiting: Array<Job> = []
      let scheduled = false
      /** Batches begun and not yet answered, and whether one of them is still running its writes. */
      let inFlight = 0
      let preparing = false
      /** When the last transaction began, for the gathering time. */
      let lastBatchAt = 0
      let gatherTimer: ReturnType<typeof setTimeout> | undefined
      let lastStorageFailureAt = 0
      const noteStorageFailure: NoteFailure = (cause) => {
        if (Option.isSome(unavailableOf(cause))) lastStorageFailureAt = Date.now()
      }
      /** Whether another batch may begin now: none running its writes, and room for one more in flight. */
      const busy = () => preparing || inFlight >= maxInFlight

      // SQLite calls are synchronous, so nothing can join a batch while one runs: after the first write
      // arrives, one turn of the event loop lets the requests whose I/O completed meanwhile queue theirs.
      const flush = () => {
        scheduled = false
        clearTimeout(gatherTimer)
        gatherTimer = undefined
        if (busy() || waiting.length === 0) return
        const jobs = waiting.slice(0, MAX_BATCH)
        waiting = waiting.slice(jobs.length)
        inFlight += 1
        preparing = true
        lastBatchAt = Date.now()
        // Once per batch: after its writes, or as it ends if it never began them (no connection, no BEGIN).
        let wrote = false
        const committing = () => {
          if (wrote) return
          wrote = true
          preparing = false
          if (waiting.length > 0) schedule()
        }
        runFork(commitBatch({
          sql,
          recordCommit: metrics.commit,
          noteStorageFailure,
          rollbackAfterFailure: maxInFlight === 1,
          jobs,
          committing
        })).addObserver(() => {
          committing()
          inFlight -= 1
          if (waiting.length > 0) schedule()
        })
      }
      const schedule = () => {
        if (scheduled || busy()) return
        const wait = waiting.every((job) => job.gathers) ? options.gatherMs - (Date.now() - lastBatchAt) : 0
        if (wait > 0) {
          gatherTimer ??= setTimeout(flush, wait)
          return
        }
        scheduled = true
        setImmediate(flush)
      }
      yield* Effect.addFinalizer(() => Effect.sync(() => clearTimeout(gatherTimer)))
      const add = (job: Job) => {
        waiting.push(job)
        schedule()
      }

      /** One write of its own; once taken, it is committed and answered even if its caller has gone. */
      const single = <A, E>(write: Effect.Effect<A, E>, gathers = false): Effect.Effect<A, E | SqlError.SqlError> =>
        Effect.async((resume) => {
          add({
            execute: (noteFailure) =>
              Effect.map(Effect.exit(write), (outcome) => {
                if (Exit.isFailure(outcome)) noteFailure(outcome.cause)
                return (commitFailure) => resume(settled(outcome, commitFailure))
              }),
            abandon: (failure) => resume(Exit.failCause(failure)),
            gathers
          })
        })

      return WriteBatcher.of({
        // Nested in the shared transaction, withTransaction is a savepoint: a failing write rolls back alone.
        run: (write) => single(sql.withTransaction(write)),
        gather: (write) => single(sql.withTransaction(write), true),
        runStatement: single,
        groupNow: (writeAll, options) => makeGroupWriter(sql, add, writeAll, options?.gathers ?? false),
        lastStorageFailureAt: () => lastStorageFailureAt
      })
    })
  )

export const WriteBatcherLive = writeBatcherLayer({ gatherMs: GATHER_MS })

/**
 * Group commit. SQLite pays for every commit (each touched page of every index is appended to the
 * WAL again), so writes from concurrent requests are queued and run by one fiber inside a shared
 * transaction, each write in its own savepoint: a failing write rolls back alone, and every caller
 * is answered only after the shared COMMIT, so "committed" still means durable before the caller
 * goes on. Under light load a batch holds one write and costs what a plain transaction costs.
 * A write that is one SQL statement can skip its savepoint (`runStatement`): SQLite already undoes a
 * failing statement alone, and the savepoint's two extra statements cost more than the write itself.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Context, Deferred, Effect, Exit, Layer, Option, Queue } from "effect"

/** Most writes per shared transaction: bounds how long other queries wait for the connection. */
const MAX_BATCH = 256

interface Job {
  /** Runs the write in a savepoint; returns how to answer its caller once the COMMIT is known. */
  readonly execute: Effect.Effect<(commitError: Option.Option<SqlError.SqlError>) => Effect.Effect<void>>
  /** Answers the caller with the shared transaction's failure, without running the write. */
  readonly abandon: (error: SqlError.SqlError) => Effect.Effect<void>
}

export class WriteBatcher extends Context.Tag("WriteBatcher")<WriteBatcher, {
  /** Runs `write` in the next shared transaction and succeeds once that transaction has committed. */
  readonly run: <A, E>(write: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
  /** As `run`, for a write that is exactly one SQL statement (atomic by itself, so no savepoint). */
  readonly runStatement: <A, E>(statement: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError.SqlError>
}>() {}

export const WriteBatcherLive = Layer.scoped(
  WriteBatcher,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const queue = yield* Queue.unbounded<Job>()

    const commitBatch = (jobs: Iterable<Job>) =>
      sql.withTransaction(Effect.forEach(jobs, (job) => job.execute)).pipe(
        Effect.matchEffect({
          onFailure: (error) => Effect.forEach(jobs, (job) => job.abandon(error)),
          onSuccess: (answers) => Effect.forEach(answers, (answer) => answer(Option.none()))
        })
      )

    // SQLite calls are synchronous, so nothing can join a batch while one runs: after the first write
    // arrives, one turn of the event loop lets the requests whose I/O completed meanwhile queue theirs.
    const nextTurn = Effect.async<void>((resume) => {
      setImmediate(() => resume(Effect.void))
    })

    // Once a write is taken it is committed and answered, even if the hub is stopping meanwhile.
    const batch = (first: Job) =>
      nextTurn.pipe(
        Effect.zipRight(Queue.takeUpTo(queue, MAX_BATCH - 1)),
        Effect.flatMap((rest) => commitBatch([first, ...rest])),
        Effect.uninterruptible
      )

    yield* Queue.take(queue).pipe(
      Effect.flatMap(batch),
      Effect.forever,
      Effect.forkScoped
    )

    /** Queues a write (run as given inside the shared transaction) and answers once that transaction committed. */
    const enqueue = <A, E>(write: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError.SqlError> =>
      Effect.flatMap(Deferred.make<A, E | SqlError.SqlError>(), (answered) => {
        const job: Job = {
          execute: Effect.map(Effect.exit(write), (exit) => (commitError) =>
            Deferred.done(answered, Option.isNone(commitError) ? exit : Exit.fail(commitError.value)).pipe(Effect.asVoid)),
          abandon: (error) => Deferred.fail(answered, error).pipe(Effect.asVoid)
        }
        return Effect.zipRight(Queue.offer(queue, job), Deferred.await(answered))
      })

    return WriteBatcher.of({
      // Nested in the shared transaction, withTransaction is a savepoint: a failing write rolls back alone.
      run: (write) => enqueue(sql.withTransaction(write)),
      runStatement: enqueue
    })
  })
)

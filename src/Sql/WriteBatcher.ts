/**
 * Group commit. SQLite pays for every commit (each touched page of every index is appended to the
 * WAL again), so writes from concurrent requests are queued and run by one fiber inside a shared
 * transaction, each write in its own savepoint: a failing write rolls back alone, and every caller
 * is answered only after the shared COMMIT, so "committed" still means durable before the caller
 * goes on. Under light load a batch holds one write and costs what a plain transaction costs.
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

    yield* Queue.takeBetween(queue, 1, MAX_BATCH).pipe(
      Effect.flatMap(commitBatch),
      Effect.forever,
      Effect.forkScoped
    )

    return WriteBatcher.of({
      run: <A, E>(write: Effect.Effect<A, E>) =>
        Effect.gen(function*() {
          const answered = yield* Deferred.make<A, E | SqlError.SqlError>()
          const job: Job = {
            execute: Effect.map(Effect.exit(sql.withTransaction(write)), (exit) => (commitError) =>
              Deferred.done(answered, Option.isNone(commitError) ? exit : Exit.fail(commitError.value)).pipe(Effect.asVoid)),
            abandon: (error) => Deferred.fail(answered, error).pipe(Effect.asVoid)
          }
          yield* Queue.offer(queue, job)
          return yield* Deferred.await(answered)
        })
    })
  })
)

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The send queue's depth over time (issue 32, the overview's chart): a queue's rows leave it once sent,
 * so its past depth cannot be read back; a sampler writes each number's depth once a minute instead.
 * `minute` is the minute's ISO text (`2026-11-27T11:20`); one row per minute and number, so replicas
 * sampling the same minute upsert one row (never count twice). Only numbers with queued sends get a
 * row: a missing row is an empty queue. Pruned by retention (HUB_RETENTION).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE queue_depth_samples (
    minute TEXT NOT NULL,
    phone_number_id TEXT NOT NULL,
    depth INTEGER NOT NULL,
    PRIMARY KEY (minute, phone_number_id)
  )`
})

/**
 * How the dispatcher finds rows to lease (see OutboxRepo.lease): the oldest due rows overall, each
 * webhook within its share of attempts in flight; and, when webhooks at their share hold the front
 * of that order, the other webhooks' first rows, one webhook at a time.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { jsonObjectInteger, placeholders, skipLocked, skipLockedText } from "../Sql/Dialect.js"
import { padded, powerOfTwoChunks } from "../Sql/SqlShapes.js"
import type { LeasedDelivery } from "./Outbox.js"

/** What a dispatcher round asks of the lease: rows for `owner` until `leaseUntil`, within the shares. */
export interface LeaseRequest {
  readonly owner: string
  readonly now: string
  readonly leaseUntil: string
  readonly limit: number
  readonly perWebhook: number
  /** Attempts in flight per webhook id. */
  readonly inFlight: ReadonlyMap<string, number>
}

/** A due row, as the lease orders it: first attempts (phase 0) before retries (phase 1), each by due time. */
interface DueRow {
  readonly id: string
  readonly webhook_id: string
  readonly phase: number
  readonly next_attempt_at: string
}

/** Rows the lease reads from the front of each phase per row it may take (see dueRows). */
const SCAN_PER_LEASED_ROW = 4

/** Most webhooks read in one statement, a power of two (two compound terms each; SQLite allows 500). */
const WEBHOOKS_PER_STATEMENT = 128

/** The rows to lease, in order, at most `limit`, each webhook within what its share leaves; ids once each. */
const pickWithinShares = (rows: ReadonlyArray<DueRow>, input: Pick<LeaseRequest, "limit" | "perWebhook" | "inFlight">) => {
  const ordered = [...rows].sort((a, b) => a.phase - b.phase || a.next_attempt_at.localeCompare(b.next_attempt_at) || a.id.localeCompare(b.id))
  const used = new Map(input.inFlight)
  const seen = new Set<string>()
  const picked: Array<DueRow> = []
  for (const row of ordered) {
    if (picked.length >= input.limit) break
    const n = used.get(row.webhook_id) ?? 0
    if (seen.has(row.id) || n >= input.perWebhook) continue
    seen.add(row.id)
    used.set(row.webhook_id, n + 1)
    picked.push(row)
  }
  return picked
}

/**
 * The lease's statements (a test checks their plans): the oldest due rows overall, within each
 * webhook's share; and, when webhooks at their share hold the front of that order (a slow receiver's
 * queue), the other webhooks' first rows, found through deliveries_webhook_due.
 */
export const leaseQueries = (sql: SqlClient.SqlClient) => {
  /** Not leased by anyone, or its lease has expired. */
  const unleased = (now: string) => sql`(lease_expires_at IS NULL OR lease_expires_at < ${now})`

  /**
   * Due rows not leased by anyone (or whose lease expired): first attempts, oldest first, then
   * retries, at most `limit` in all, each webhook taking only what its share leaves. Each phase reads
   * a range of deliveries_due, bounded: under load the front mixes every webhook's rows, and a few
   * times the rows wanted (plus the shares of webhooks left out) finds them; a webhook out of share
   * with a long queue at the front then costs a bounded read, and the lease looks past it through
   * deliveries_webhook_due (see `lease`).
   */
  const dueRows = (input: LeaseRequest) => {
    const full = [...input.inFlight].filter(([, n]) => n >= input.perWebhook).map(([id]) => id)
    const phase = (status: "pending" | "failed") =>
      sql`SELECT id, webhook_id, next_attempt_at FROM (
          SELECT id, webhook_id, next_attempt_at FROM deliveries
           WHERE status = ${status} AND next_attempt_at <= ${input.now} AND ${unleased(input.now)}
           ORDER BY next_attempt_at LIMIT ${(input.limit + input.perWebhook * (full.length + 1)) * SCAN_PER_LEASED_ROW}
           ${skipLocked(sql)}
        ) AS front
        WHERE NOT (${sql.in("webhook_id", padded(full))})
        LIMIT ${input.limit}`
    const busy = JSON.stringify(Object.fromEntries(input.inFlight))
    return sql`SELECT id FROM (
        SELECT id, webhook_id, phase, next_attempt_at,
               ROW_NUMBER() OVER (PARTITION BY webhook_id ORDER BY phase, next_attempt_at) AS nth
          FROM (
            SELECT id, webhook_id, 0 AS phase, next_attempt_at FROM (${phase("pending")}) AS first_attempts
            UNION ALL
            SELECT id, webhook_id, 1 AS phase, next_attempt_at FROM (${phase("failed")}) AS retries
          ) AS due
      ) AS ranked
      WHERE nth <= ${input.perWebhook} - COALESCE(${jsonObjectInteger(sql, busy, "ranked.webhook_id")}, 0)
      ORDER BY phase, next_attempt_at LIMIT ${input.limit}`
  }

  /** The webhooks with queued rows: one seek of deliveries_webhook_due each (a test checks the plan). */
  const queuedWebhooks = sql<{ readonly webhook_id: string }>`WITH RECURSIVE queued (webhook_id) AS (
      SELECT MIN(webhook_id) FROM deliveries WHERE next_attempt_at IS NOT NULL
      UNION ALL
      SELECT (SELECT MIN(d.webhook_id) FROM deliveries d WHERE d.next_attempt_at IS NOT NULL AND d.webhook_id > queued.webhook_id)
        FROM queued WHERE queued.webhook_id IS NOT NULL
    )
    SELECT webhook_id FROM queued WHERE webhook_id IS NOT NULL`

  /** Each webhook's first due rows of each phase, up to its share: one range of deliveries_webhook_due each. */
  const lockRows = skipLockedText(sql)
  const dueOf = (input: LeaseRequest, shares: ReadonlyArray<readonly [webhookId: string, share: number]>) =>
    sql.unsafe<DueRow>(
      placeholders(sql, shares.flatMap(() =>
        [0, 1].map((rank) =>
          `SELECT * FROM (SELECT id, webhook_id, ${rank} AS phase, next_attempt_at FROM deliveries
            WHERE webhook_id = ? AND status = '${rank === 0 ? "pending" : "failed"}' AND next_attempt_at <= ?
              AND (lease_expires_at IS NULL OR lease_expires_at < ?)
            ORDER BY next_attempt_at LIMIT ?${lockRows === "" ? "" : ` ${lockRows}`}) AS due_${rank}`
        )
      ).join(" UNION ALL ")),
      shares.flatMap(([webhookId, share]) => [webhookId, input.now, input.now, share, webhookId, input.now, input.now, share])
    )

  /**
   * The picked rows still free to lease, found by primary key. Only the lease is checked again: a
   * further condition on status or due time let SQLite read them through a due index instead, every
   * queued row (a test checks the plan); a row finished meanwhile is left out after the lease.
   */
  const takeable = (ids: ReadonlyArray<string>, now: string) => sql`${sql.in("id", padded(ids))} AND ${unleased(now)}`

  return { unleased, dueRows, queuedWebhooks, dueOf, takeable }
}

/** Leases due deliveries for `input.owner`: see OutboxRepo.lease. */
export const makeLease = (sql: SqlClient.SqlClient) => {
  const queries = leaseQueries(sql)

  /**
   * Rows of webhooks with share left beyond the front the first read covered, read one webhook at a
   * time through deliveries_webhook_due: after a lease that took `taken` rows and fell short.
   */
  const lookPast = (input: LeaseRequest, taken: ReadonlyArray<{ readonly webhook_id: string }>) =>
    Effect.gen(function*() {
      const inFlight = new Map(input.inFlight)
      for (const row of taken) inFlight.set(row.webhook_id, (inFlight.get(row.webhook_id) ?? 0) + 1)
      const shares = (yield* queries.queuedWebhooks).flatMap((row): ReadonlyArray<readonly [string, number]> => {
        const share = input.perWebhook - (inFlight.get(row.webhook_id) ?? 0)
        return share > 0 ? [[row.webhook_id, share]] : []
      })
      const rows = yield* Effect.forEach(powerOfTwoChunks(shares, WEBHOOKS_PER_STATEMENT), (chunk) => queries.dueOf(input, chunk))
      return pickWithinShares(rows.flat(), { limit: input.limit - taken.length, perWebhook: input.perWebhook, inFlight }).map((row) => row.id)
    })

  /** Leases rows by id, if still free; the lease condition is checked again on the row itself. */
  const take = (input: LeaseRequest, ids: ReadonlyArray<string>) =>
    ids.length === 0 ? Effect.succeed([]) : sql<{ readonly id: string; readonly webhook_id: string }>`UPDATE deliveries
      SET lease_owner = ${input.owner}, lease_expires_at = ${input.leaseUntil}
      WHERE ${queries.takeable(ids, input.now)}
      RETURNING id, webhook_id`

  return (input: LeaseRequest): Effect.Effect<ReadonlyArray<LeasedDelivery>> =>
    Effect.gen(function*() {
      // The lease condition is checked again on the row itself, so that a concurrent leaser (Postgres
      // re-checks the outer WHERE after a row lock) can never take the same row twice.
      const first = yield* sql<{ readonly id: string; readonly webhook_id: string }>`UPDATE deliveries
        SET lease_owner = ${input.owner}, lease_expires_at = ${input.leaseUntil}
        WHERE id IN (${queries.dueRows(input)}) AND ${queries.unleased(input.now)}
        RETURNING id, webhook_id`
      // Short of the limit with some webhook at its share: the first read left that webhook's rows
      // out (or stopped at its bound on them), so other webhooks' rows may wait further on. With
      // no webhook at its share, every row read was eligible: there are no more due rows.
      const used = new Map(input.inFlight)
      for (const row of first) used.set(row.webhook_id, (used.get(row.webhook_id) ?? 0) + 1)
      const lookFurther = first.length < input.limit && [...used.values()].some((n) => n >= input.perWebhook)
      const taken = lookFurther ? [...first, ...(yield* Effect.flatMap(lookPast(input, first), (ids) => take(input, ids)))] : first
      if (taken.length === 0) return []
      // A row finished or cancelled meanwhile is left alone (its lease lapses unused).
      const rows = yield* sql<LeasedDelivery>`
        SELECT d.id, d.webhook_id, d.message_id, d.status, d.attempts, d.final_attempt, d.next_attempt_at, e.body, w.url,
               w.active AS webhook_active, w.failing_since AS webhook_failing_since,
               w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at
          FROM deliveries d
          JOIN events e ON e.id = d.event_id
          JOIN webhooks w ON w.id = d.webhook_id
         WHERE ${sql.in("d.id", padded(taken.map((row) => row.id)))} AND d.lease_owner = ${input.owner}
           AND d.status IN ('pending', 'failed')`
      // RETURNING gives no order; first attempts go first, each phase by due time.
      const phase = (row: LeasedDelivery) => (row.status === "pending" ? 0 : 1)
      return [...rows].sort((a, b) => phase(a) - phase(b) || a.next_attempt_at.localeCompare(b.next_attempt_at))
    }).pipe(Effect.orDie)
}

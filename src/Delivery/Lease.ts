/**
 * How the dispatcher finds rows to lease (see OutboxRepo.lease): the oldest due rows overall, each
 * webhook and each organization within its share of attempts in flight, then the idle slots an
 * organization past its share may take (the shares are Fairness.ts's); and, when webhooks or organizations at their
 * share hold the front of that order, the other webhooks' first rows, one webhook at a time. The
 * webhooks with queued rows are listed first (a bounded list), so the read is bounded by what their
 * shares can take; the candidates are read without locks, the shares applied here, and the rows
 * picked are then leased by id: the lease condition checked again on each and, on PostgreSQL, only
 * the rows taken locked, skipping any another replica is taking (issue 34).
 */
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Effect } from "effect"
import { isPostgres, placeholders, skipLocked } from "../Sql/Dialect.js"
import { padded, powerOfTwoChunks } from "../Sql/StatementShapes.js"
import {
  anyAtShare,
  atShare,
  type DueRow,
  type InFlight,
  type Owned,
  pickWithinShares,
  rowsLeft,
  withAttempts
} from "./Fairness.js"
import type { LeasedDelivery } from "./Records.js"

/** What a dispatcher round asks of the lease: rows for `owner` until `leaseUntil`, within the shares. */
export interface LeaseRequest {
  readonly owner: string
  readonly now: string
  readonly leaseUntil: string
  readonly limit: number
  readonly perWebhook: number
  /** Attempts in flight per webhook id. */
  readonly inFlight: ReadonlyMap<string, number>
  readonly perOrganization: number
  /** Attempts in flight per organization id. */
  readonly inFlightByOrganization: ReadonlyMap<string, number>
  /** How many rows organizations past their share may take in all (Admission's overShareRoom). */
  readonly overShareRoom: number
}

/**
 * The conditions that name the predicates of the two indexes the lease reads its front through
 * (migration 0032), so both engines know they may use them: a queued row no one leases
 * (deliveries_due, with `status` and the due time), and a queued row whose lease expired
 * (deliveries_leased). The metrics count due rows through the same two (OutboxStates.ts).
 */
export const freeDue = (sql: SqlClient.SqlClient, status: "pending" | "failed", now: string) =>
  sql`status = ${status} AND next_attempt_at IS NOT NULL AND next_attempt_at <= ${now} AND lease_owner IS NULL`
export const expiredLease = (sql: SqlClient.SqlClient, now: string) =>
  sql`next_attempt_at IS NOT NULL AND lease_owner IS NOT NULL AND lease_expires_at < ${now}`

/** Rows the lease reads from the front of each phase per row it may take (see dueRows). */
const SCAN_PER_LEASED_ROW = 4

/**
 * How many webhooks with queued rows the lease lists before reading: those in flight (which may have
 * no room left) and enough others to fill the limit at their full share, and one more. A list that
 * long may be cut short, and then the shares' room is not known: the read is bounded by the limit.
 */
const listBound = (input: LeaseRequest) =>
  input.inFlight.size + Math.ceil(input.limit / Math.max(1, input.perWebhook)) + 1

/** No bound on the webhooks listed (a recursive CTE's counter, an integer on both engines). */
const ALL_WEBHOOKS = 2_147_483_647

/** Most webhooks read in one statement, a power of two (two compound terms each; SQLite allows 500). */
const WEBHOOKS_PER_STATEMENT = 128

/** What is in flight, as the request tells it. */
const inFlightOf = (input: LeaseRequest): InFlight => ({
  byWebhook: input.inFlight,
  byOrganization: input.inFlightByOrganization
})

/** The rows to pick from, within the request's shares with `inFlight` and `overShareRoom` (see Fairness.pickWithinShares). */
const pick = <Row extends DueRow>(
  rows: ReadonlyArray<Row>,
  input: LeaseRequest,
  limit: number,
  inFlight: InFlight,
  overShareRoom: number
) =>
  pickWithinShares(rows, {
    limit,
    perWebhook: input.perWebhook,
    perOrganization: input.perOrganization,
    overShareRoom,
    ...inFlight
  })

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
   * retries, `wanted` at most in all, each webhook taking only what its share leaves. Each phase reads
   * a range of deliveries_due (free rows only: none in flight to walk past) and one of
   * deliveries_leased (expired leases), bounded: under load the front mixes every webhook's rows, and a few
   * times the rows wanted (plus the shares of webhooks left out) finds them; a webhook out of share
   * with a long queue at the front then costs a bounded read, and the lease looks past it through
   * deliveries_webhook_due (see `lease`). Read without locks: only the rows taken are locked (`take`).
   */
  const dueRows = (input: LeaseRequest, wanted: number) => {
    const full = atShare(input.inFlight, input.perWebhook)
    // Organizations at their share are left out only when none may take idle slots.
    const fullOrganizations = input.overShareRoom > 0
      ? []
      : atShare(input.inFlightByOrganization, input.perOrganization)
    // Enough of the front that, once the webhooks and organizations at their share are left out, the rows wanted are there.
    const front = (wanted + input.perWebhook * full.length + input.perOrganization * fullOrganizations.length) *
      SCAN_PER_LEASED_ROW
    // Rows whose lease expired (a replica stopped without releasing them: usually none), then free
    // ones. The expired ones' status and due time are checked outside the read: inside, PostgreSQL's
    // planner took them for a cheap way in (its statistics lag a fast-moving queue) and read the
    // whole backlog through deliveries_due (30,000–100,000 rows for none, 3–25 ms).
    const phase = (status: "pending" | "failed", rank: number) =>
      sql`SELECT due.id, due.webhook_id, w.organization_id, ${rank} AS phase, due.next_attempt_at FROM (
          SELECT id, webhook_id, next_attempt_at FROM (SELECT id, webhook_id, status, next_attempt_at FROM deliveries
            WHERE ${expiredLease(sql, input.now)} ORDER BY lease_expires_at LIMIT ${front}) AS expired
          WHERE status = ${status} AND next_attempt_at <= ${input.now}
          UNION ALL
          SELECT * FROM (SELECT id, webhook_id, next_attempt_at FROM deliveries
            WHERE ${freeDue(sql, status, input.now)} ORDER BY next_attempt_at LIMIT ${front}) AS free
        ) AS due
        JOIN webhooks w ON w.id = due.webhook_id
        WHERE NOT (${sql.in("due.webhook_id", padded(full))}) AND NOT (${
        sql.in("w.organization_id", padded(fullOrganizations))
      })`
    // Hand-typed, not decoded with a Schema: read on every lease (speed).
    return sql<DueRow>`${phase("pending", 0)} UNION ALL ${phase("failed", 1)}`
  }

  /**
   * The webhooks with queued rows, with their organizations, `most` at most: one seek of
   * deliveries_webhook_due each (a test checks the plan). Each seek is ordered by that index's whole
   * key, not a MIN(webhook_id): PostgreSQL planned the MIN on deliveries_webhook at times, reading
   * every finished delivery of a webhook before its first queued one (issue 34); in this order that
   * index would have to sort a webhook's every delivery first.
   */
  const firstQueued = (after: Statement.Fragment) =>
    sql`(SELECT d.webhook_id FROM deliveries d WHERE d.next_attempt_at IS NOT NULL ${after}
      ORDER BY d.webhook_id, d.status, d.next_attempt_at LIMIT 1)`
  const queuedWebhooks = (most: number) =>
    sql<Owned>`WITH RECURSIVE queued (webhook_id, n) AS (
      SELECT ${firstQueued(sql``)}, 1
      UNION ALL
      SELECT ${firstQueued(sql`AND d.webhook_id > queued.webhook_id`)}, n + 1
        FROM queued WHERE queued.webhook_id IS NOT NULL AND n < ${most}
    )
    SELECT q.webhook_id, w.organization_id FROM queued q JOIN webhooks w ON w.id = q.webhook_id`

  /** Each webhook's first due rows of each phase, up to its share: one range of deliveries_webhook_due each. */
  const dueOf = (input: LeaseRequest, shares: ReadonlyArray<readonly [webhookId: string, share: number]>) =>
    sql.unsafe<Omit<DueRow, "organization_id">>(
      placeholders(
        sql,
        shares.flatMap(() =>
          [0, 1].map((rank) =>
            `SELECT * FROM (SELECT id, webhook_id, ${rank} AS phase, next_attempt_at FROM deliveries
            WHERE webhook_id = ? AND status = '${rank === 0 ? "pending" : "failed"}' AND next_attempt_at <= ?
              AND (lease_expires_at IS NULL OR lease_expires_at < ?)
            ORDER BY next_attempt_at LIMIT ?) AS due_${rank}`
          )
        ).join(" UNION ALL ")
      ),
      shares.flatMap((
        [webhookId, share]
      ) => [webhookId, input.now, input.now, share, webhookId, input.now, input.now, share])
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
   * time through deliveries_webhook_due: after a first pick of `taken` rows that fell short. `listed`
   * is every webhook with queued rows, if the lease's first list was not cut short.
   */
  const lookPast = (
    input: LeaseRequest,
    listed: ReadonlyArray<Owned> | undefined,
    taken: ReadonlyArray<DueRow>,
    overShareTaken: number
  ) =>
    Effect.gen(function*() {
      const inFlight = withAttempts(inFlightOf(input), taken)
      const overShareRoom = input.overShareRoom - overShareTaken
      const organizationOf = new Map<string, string>()
      const shares = (listed ?? (yield* queries.queuedWebhooks(ALL_WEBHOOKS))).flatMap(
        (row): ReadonlyArray<readonly [string, number]> => {
          organizationOf.set(row.webhook_id, row.organization_id)
          const share = rowsLeft(input, inFlight, overShareRoom, row)
          return share > 0 ? [[row.webhook_id, share]] : []
        }
      )
      const rows = yield* Effect.forEach(
        powerOfTwoChunks(shares, WEBHOOKS_PER_STATEMENT),
        (chunk) => queries.dueOf(input, chunk)
      )
      const owned = rows.flat().map((row) => ({ ...row, organization_id: organizationOf.get(row.webhook_id) ?? "" }))
      return pick(owned, input, input.limit - taken.length, inFlight, overShareRoom).picked
    })

  /**
   * Leases rows by id, if still free; the lease condition is checked again on the row itself. On
   * PostgreSQL the rows are locked here, not when read, and a row another replica is taking (locked
   * by its lease, not yet committed) is skipped rather than waited for: only the rows taken are locked.
   */
  const setLease = (input: LeaseRequest, ids: ReadonlyArray<string>) =>
    sql`UPDATE deliveries SET lease_owner = ${input.owner}, lease_expires_at = ${input.leaseUntil}
      WHERE ${
      isPostgres(sql)
        ? sql`id IN (SELECT id FROM deliveries WHERE ${queries.takeable(ids, input.now)} ${skipLocked(sql)})
            AND ${queries.unleased(input.now)}`
        : queries.takeable(ids, input.now)
    }`

  /**
   * What the dispatcher needs of each leased row, its event and its webhook (`d`, `e`, `w`). A row
   * finished or cancelled meanwhile is left alone (its lease lapses unused). A delivery of a filtered
   * webhook that takes only some of its event's changes carries its own body.
   */
  const leasedColumns = sql.literal(
    `d.id, d.webhook_id, d.event_id, e.traceparent, w.organization_id, d.contact_key, d.message_id, d.status,
     d.attempts, d.final_attempt, d.next_attempt_at, d.lease_expires_at, COALESCE(d.body, e.body) AS body, w.url,
     w.active AS webhook_active, w.failing_since AS webhook_failing_since,
     w.secret_encrypted, w.previous_secret_encrypted, w.previous_secret_expires_at, w.headers, w.headers_encrypted`
  )
  const leasedJoins = sql.literal(
    "JOIN events e ON e.id = d.event_id JOIN webhooks w ON w.id = d.webhook_id WHERE d.status IN ('pending', 'failed')"
  )

  /**
   * Leases the rows and reads them. On PostgreSQL one statement, the UPDATE's RETURNING joined to
   * their events and webhooks (one round trip fewer per lease: issue 34); SQLite's RETURNING cannot
   * join, so it leases, then reads back the rows now this owner's.
   * Hand-typed, not decoded with a Schema: the lease is the dispatcher's hot path (speed).
   */
  const take = (
    input: LeaseRequest,
    ids: ReadonlyArray<string>
  ): Effect.Effect<ReadonlyArray<LeasedDelivery>, SqlError.SqlError> =>
    ids.length === 0
      ? Effect.succeed([])
      : isPostgres(sql)
      ? sql<LeasedDelivery>`WITH d AS (${
        setLease(input, ids)
      } RETURNING *) SELECT ${leasedColumns} FROM d ${leasedJoins}`
      : Effect.flatMap(
        sql<{ readonly id: string }>`${setLease(input, ids)} RETURNING id`,
        (taken) =>
          taken.length === 0 ?
            Effect.succeed([]) :
            sql<LeasedDelivery>`SELECT ${leasedColumns} FROM deliveries d ${leasedJoins}
            AND ${sql.in("d.id", padded(taken.map((row) => row.id)))} AND d.lease_owner = ${input.owner}`
      )

  /**
   * The webhooks with queued rows, listed up to listBound, and what their shares can take in all (at
   * most the limit); `listed` is undefined when the list was cut short (the room is then the limit).
   */
  const room = (input: LeaseRequest) => {
    const bound = listBound(input)
    return Effect.map(queries.queuedWebhooks(bound), (rows) => {
      if (rows.length >= bound) return { listed: undefined, wanted: input.limit }
      const inFlight = inFlightOf(input)
      const shares = rows.reduce(
        (sum, row) => sum + Math.max(0, rowsLeft(input, inFlight, input.overShareRoom, row)),
        0
      )
      return { listed: rows, wanted: Math.min(input.limit, shares) }
    })
  }

  return (input: LeaseRequest): Effect.Effect<ReadonlyArray<LeasedDelivery>> =>
    Effect.gen(function*() {
      // The read is bounded by what the shares can take: about the rows wanted, not the limit's
      // worth (a few webhooks at their share left most of a front of the limit's size untaken).
      const { listed, wanted } = yield* room(input)
      if (wanted === 0) return []
      // The shares are applied to the front of the due order; the rows picked are then leased by id,
      // the lease condition checked again on each (a concurrent leaser never takes a row twice).
      const { picked, overShare } = pick(
        yield* queries.dueRows(input, wanted),
        input,
        wanted,
        inFlightOf(input),
        input.overShareRoom
      )
      // Short of the rows wanted with some webhook or organization at its share: the first read left
      // its rows out (or stopped at its bound on them), so other webhooks' rows may wait further on.
      // With none at its share, every row read was eligible: there are no more due rows.
      const lookFurther = picked.length < wanted && anyAtShare(withAttempts(inFlightOf(input), picked), input)
      const more = lookFurther ? yield* lookPast(input, listed, picked, overShare) : []
      const rows = yield* take(input, [...picked, ...more].map((row) => row.id))
      // RETURNING gives no order; first attempts go first, each phase by due time.
      const phase = (row: LeasedDelivery) => (row.status === "pending" ? 0 : 1)
      return [...rows].sort((a, b) => phase(a) - phase(b) || a.next_attempt_at.localeCompare(b.next_attempt_at))
    }).pipe(Effect.orDie)
}

/**
 * SQL for the calls the upstream's webhooks told of (migration 0007): events are written in the
 * ingress's transaction (through MessagesRepo.applyChanges), and the pre-accept reads the newest
 * incoming call still ringing.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import { identifiersOf } from "../Messages/Identities.js"
import { type CallEvent, callStateRank } from "./CallEvents.js"

/**
 * Calls are kept a day after their last event (as received, not as the upstream dates it): long after
 * any could still ring, short enough that the table stays small.
 */
const KEPT_MS = 24 * 3600 * 1000

/**
 * Writes call events in order, each moving its call forward only. One statement per event: a call's
 * events often come together, and one upsert cannot touch a row twice (PostgreSQL refuses it). Call
 * events are rare beside messages, so this costs nothing that matters. Run it in a transaction.
 */
export const recordCallEvents = (sql: SqlClient.SqlClient, events: ReadonlyArray<CallEvent>, now: string) =>
  Effect.gen(function*() {
    if (events.length === 0) return
    for (const event of events) {
      yield* sql`INSERT INTO calls ${
        sql.insert({
          instance_id: event.instanceId,
          call_id: event.callId,
          user_number: event.userNumber ?? null,
          user_id: event.userId ?? null,
          direction: event.direction ?? null,
          state: event.state,
          state_rank: callStateRank[event.state],
          started_at: event.at,
          updated_at: now
        })
      } ON CONFLICT (instance_id, call_id) DO UPDATE SET
          state = excluded.state, state_rank = excluded.state_rank, updated_at = excluded.updated_at,
          user_number = COALESCE(calls.user_number, excluded.user_number),
          user_id = COALESCE(calls.user_id, excluded.user_id),
          direction = COALESCE(calls.direction, excluded.direction)
        WHERE calls.state_rank < excluded.state_rank`
    }
    yield* sql`DELETE FROM calls WHERE updated_at < ${new Date(Date.parse(now) - KEPT_MS).toISOString()}`
  })

export class CallsRepo extends Context.Tag("CallsRepo")<CallsRepo, {
  /**
   * The newest incoming call from `user` to the instance that rings and started at or after `since`
   * (ISO 8601): by their number or business-scoped user id, or any other identifier paired with it.
   */
  readonly ringingCallFrom: (
    instance: { readonly id: InstanceId; readonly organizationId: OrganizationId },
    user: string,
    since: string
  ) => Effect.Effect<string | undefined>
}>() {}

export const CallsRepoLive = Layer.effect(
  CallsRepo,
  Effect.map(SqlClient.SqlClient, (sql) =>
    CallsRepo.of({
      // Each identifier has its index (migrations 0007 and 0017).
      ringingCallFrom: (instance, user, since) =>
        Effect.flatMap(identifiersOf(sql, instance.organizationId, user), (identifiers) =>
          sql<{ readonly call_id: string }>`SELECT call_id FROM calls
            WHERE instance_id = ${instance.id} AND (user_number IN ${sql.in(identifiers)} OR user_id IN ${
            sql.in(identifiers)
          })
              AND started_at >= ${since} AND state = 'ringing' AND direction = 'USER_INITIATED'
            ORDER BY started_at DESC LIMIT 1`).pipe(
            Effect.map((rows) =>
              rows[0]?.call_id
            ),
            Effect.orDie
          )
    }))
)

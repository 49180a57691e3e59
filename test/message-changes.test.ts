/**
 * Status events and inbound messages applied as a group (MessagesRepo.applyChanges) end exactly as
 * if applied one by one, in order, by the statements the hub used before it grouped them (kept here
 * as the reference): forward-only moves, the latest move's error, early statuses, inbound once.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { InstanceId, OrganizationId } from "../src/Domain/Ids.js"
import type { MessageChange } from "../src/Messages/ChangePlan.js"
import { type StatusUpdate } from "../src/Messages/Records.js"
import { MessagesRepo } from "../src/Messages/Repo.js"
import { engines } from "./support/Databases.js"
import { seedTenant, testHub } from "./support/TestHub.js"

type Owner = { readonly organizationId: OrganizationId; readonly instanceId: InstanceId }

const RANK =
  "(CASE status WHEN 'pending' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'failed' THEN 3 WHEN 'read' THEN 4 END)"
const ranks = { sent: 1, delivered: 2, failed: 3, read: 4 }

/** The reference: one change at a time, with the per-event statements of the ungrouped hub. */
const applyOneByOne = (changes: ReadonlyArray<MessageChange>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const change of changes) {
      if (change._tag === "Received") {
        const m = change.message
        yield* sql`INSERT INTO messages (id, organization_id, instance_id, direction, wa_message_id, from_number, type, status, status_at, created_at, updated_at)
          VALUES (${`msg_ref_${m.instanceId}_${m.waMessageId}`}, ${m.organizationId}, ${m.instanceId}, 'inbound', ${m.waMessageId}, ${m.party}, ${m.type},
                  'delivered', ${m.at}, ${m.at}, ${m.at})
          ON CONFLICT (instance_id, wa_message_id) WHERE wa_message_id IS NOT NULL DO NOTHING`
        continue
      }
      const u = change.update
      const error = u.error === undefined ? null : JSON.stringify(u.error)
      const moved = yield* sql`UPDATE messages SET status = ${u.status}, status_at = ${u.at}, ${
        sql.literal(`${u.status}_at`)
      } = ${u.at}, error = COALESCE(${error}, error)
        WHERE instance_id = ${u.instanceId} AND wa_message_id = ${u.waMessageId} AND direction = 'outbound'
          AND ${sql.literal(RANK)} < ${ranks[u.status]} RETURNING id`
      if (moved.length > 0) continue
      yield* sql`INSERT INTO message_status_backlog (instance_id, wa_message_id, status, status_rank, status_at, error)
        SELECT ${u.instanceId}, ${u.waMessageId}, ${u.status}, ${ranks[u.status]}, ${u.at}, ${error}
        WHERE NOT EXISTS (SELECT 1 FROM messages WHERE instance_id = ${u.instanceId} AND wa_message_id = ${u.waMessageId})
        ON CONFLICT (instance_id, wa_message_id, status) DO NOTHING`
    }
  })

/** What the changes left, comparable across instances. */
const stateOf = (instanceId: InstanceId) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const messages =
      yield* sql`SELECT wa_message_id, direction, status, status_at, sent_at, delivered_at, read_at, failed_at, error, from_number, type, created_at
      FROM messages WHERE instance_id = ${instanceId} ORDER BY wa_message_id, direction`
    const early = yield* sql`SELECT wa_message_id, status, status_rank, status_at, error
      FROM message_status_backlog WHERE instance_id = ${instanceId} ORDER BY wa_message_id, status`
    return { messages, early }
  })

const seedOutbound = (owner: Owner, records: ReadonlyArray<readonly [waMessageId: string, status: string]>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const [waMessageId, status] of records) {
      yield* sql`INSERT INTO messages (id, organization_id, instance_id, direction, wa_message_id, to_number, type, status, error, created_at, updated_at)
        VALUES (${`msg_${owner.instanceId}_${waMessageId}`}, ${owner.organizationId}, ${owner.instanceId}, 'outbound', ${waMessageId}, '16505551234',
                'text', ${status}, ${
        status === "failed" ? "[{\"code\":1}]" : null
      }, '2026-07-01T00:00:00.000Z', '2026-07-01T00:00:00.000Z')`
    }
  })

/** A small deterministic generator (the same sequences on every run). */
const generator = (seed: number) => {
  let state = seed
  return (n: number) => {
    state = (state * 1103515245 + 12345) % 2 ** 31
    return state % n
  }
}

const IDS = ["wamid.A", "wamid.B", "wamid.C", "wamid.D", "wamid.E", "wamid.F"]
const STATES = ["sent", "delivered", "read", "failed"] as const

/** A random group: statuses (some with errors, some repeated) and inbound messages over a few ids. */
const randomChanges = (owner: Owner, seed: number): ReadonlyArray<MessageChange> => {
  const pick = generator(seed)
  return Array.from({ length: 24 }, (_, i): MessageChange => {
    const waMessageId = IDS[pick(IDS.length)] ?? "wamid.A"
    const at = `2026-07-01T00:00:${String(10 + i).padStart(2, "0")}.000Z`
    if (pick(6) === 0) {
      return { _tag: "Received", message: { ...owner, waMessageId, party: `1650555${1000 + i}`, type: "text", at } }
    }
    const status = STATES[pick(STATES.length)] ?? "sent"
    const update: StatusUpdate = {
      instanceId: owner.instanceId,
      waMessageId,
      status,
      at,
      ...(pick(3) === 0 ? { error: [{ code: 131000 + i, title: `error ${i}` }] } : {})
    }
    return { _tag: "Status", update }
  })
}

/** The same changes for another instance. */
const forOwner = (changes: ReadonlyArray<MessageChange>, owner: Owner): ReadonlyArray<MessageChange> =>
  changes.map((c) =>
    c._tag === "Status"
      ? { _tag: "Status", update: { ...c.update, instanceId: owner.instanceId } }
      : { _tag: "Received", message: { ...c.message, ...owner } }
  )

const STORED: ReadonlyArray<readonly [string, string]> = [["wamid.A", "pending"], ["wamid.B", "sent"], [
  "wamid.C",
  "delivered"
], ["wamid.D", "failed"]]

for (const engine of engines) {
  layer(testHub({ engine }))(`message changes applied as a group (${engine})`, (it) => {
    it.effect("end as the same changes applied one by one, over many random groups", () =>
      Effect.gen(function*() {
        const repo = yield* MessagesRepo
        const sql = yield* SqlClient.SqlClient
        for (let seed = 1; seed <= 40; seed++) {
          const reference = yield* seedTenant()
          const grouped = yield* seedTenant()
          yield* seedOutbound(reference, STORED)
          yield* seedOutbound(grouped, STORED)
          // wamid.E is someone's inbound message; wamid.F is unknown until a change names it.
          const inboundE = {
            waMessageId: "wamid.E",
            party: "16505550000",
            type: "text",
            at: "2026-07-01T00:00:00.000Z"
          }
          yield* applyOneByOne([{ _tag: "Received", message: { ...reference, ...inboundE } }])
          yield* applyOneByOne([{ _tag: "Received", message: { ...grouped, ...inboundE } }])

          const changes = randomChanges(reference, seed)
          yield* applyOneByOne(changes)
          const outcomes = yield* sql.withTransaction(repo.applyChanges(forOwner(changes, grouped)))
          expect(outcomes).toHaveLength(changes.length)

          const expected = yield* stateOf(reference.instanceId)
          const actual = yield* stateOf(grouped.instanceId)
          expect({ seed, ...actual }).toEqual({ seed, ...expected })
        }
      }))

    it.effect("a failure's error survives a later read in the same group; a status before the inbound message of its id is kept early", () =>
      Effect.gen(function*() {
        const repo = yield* MessagesRepo
        const sql = yield* SqlClient.SqlClient
        const owner = yield* seedTenant()
        yield* seedOutbound(owner, [["wamid.P", "sent"]])
        const error = [{ code: 131026, title: "Message undeliverable" }]
        const status = (
          waMessageId: string,
          s: StatusUpdate["status"],
          second: number,
          withError = false
        ): MessageChange => ({
          _tag: "Status",
          update: {
            instanceId: owner.instanceId,
            waMessageId,
            status: s,
            at: `2026-07-02T00:00:0${second}.000Z`,
            ...(withError ? { error } : {})
          }
        })
        const outcomes = yield* sql.withTransaction(repo.applyChanges([
          status("wamid.P", "failed", 1, true),
          status("wamid.P", "delivered", 2),
          status("wamid.P", "read", 3),
          status("wamid.P", "read", 4),
          status("wamid.Q", "sent", 5),
          status("wamid.Q", "sent", 6),
          {
            _tag: "Received",
            message: {
              ...owner,
              waMessageId: "wamid.Q",
              party: "16505550001",
              type: "image",
              at: "2026-07-02T00:00:07.000Z"
            }
          },
          {
            _tag: "Received",
            message: {
              ...owner,
              waMessageId: "wamid.Q",
              party: "16505550001",
              type: "image",
              at: "2026-07-02T00:00:08.000Z"
            }
          },
          status("wamid.Q", "delivered", 9)
        ]))
        expect(outcomes).toEqual([true, false, true, false, false, false, true, false, false])
        const state = yield* stateOf(owner.instanceId)
        expect(state.messages).toEqual([
          {
            wa_message_id: "wamid.P",
            direction: "outbound",
            status: "read",
            status_at: "2026-07-02T00:00:03.000Z",
            // Both moves of the group keep their step's time; the refused `delivered` none.
            sent_at: null,
            delivered_at: null,
            read_at: "2026-07-02T00:00:03.000Z",
            failed_at: "2026-07-02T00:00:01.000Z",
            error: JSON.stringify(error),
            from_number: null,
            type: "text",
            created_at: "2026-07-01T00:00:00.000Z"
          },
          {
            wa_message_id: "wamid.Q",
            direction: "inbound",
            status: "delivered",
            status_at: "2026-07-02T00:00:07.000Z",
            sent_at: null,
            delivered_at: null,
            read_at: null,
            failed_at: null,
            error: null,
            from_number: "16505550001",
            type: "image",
            created_at: "2026-07-02T00:00:07.000Z"
          }
        ])
        // The first `sent` for wamid.Q came before any record held that id; the `delivered` after the inbound record did not.
        expect(state.early).toEqual([{
          wa_message_id: "wamid.Q",
          status: "sent",
          status_rank: 1,
          status_at: "2026-07-02T00:00:05.000Z",
          error: null
        }])
        expect(yield* repo.applyChanges([])).toEqual([])
      }))
  })
}

import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * The rows a delivery names, written straight to a migrated database for tests below the HTTP
 * server: organization `org_1`, its instance `ins_1` (phone number id 1, business account 2), a
 * webhook of that instance for each id given, and one event, `evt_1`.
 */
export const seedOutboxParents = (webhookIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const now = new Date().toISOString()
    yield* sql`INSERT INTO organizations ${sql.insert({ id: "org_1", name: "o", created_at: now })}`
    yield* sql`INSERT INTO instances ${
      sql.insert({
        id: "ins_1",
        organization_id: "org_1",
        name: "i",
        phone_number_id: "1",
        waba_id: "2",
        created_at: now
      })
    }`
    yield* addWebhooks(webhookIds)
    yield* sql`INSERT INTO events ${
      sql.insert({ id: "evt_1", instance_id: "ins_1", body: "{}", change_count: 1, received_at: now })
    }`
  })

/** More active webhooks of instance `ins_1`. */
export const addWebhooks = (ids: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const now = new Date().toISOString()
    return Effect.forEach(ids, (id) =>
      sql`INSERT INTO webhooks ${
        sql.insert({
          id,
          organization_id: "org_1",
          instance_id: "ins_1",
          name: id,
          url: "http://127.0.0.1:9/",
          secret_encrypted: "x",
          active: 1,
          created_at: now,
          updated_at: now
        })
      }`, { discard: true })
  })

/** A due first attempt of event `eventId` to `webhookId`, with its own body or (null) its event's. */
export const deliveryRow = (id: string, webhookId: string, eventId = "evt_1", body: string | null = null) => {
  const now = new Date().toISOString()
  return {
    id,
    webhook_id: webhookId,
    event_id: eventId,
    message_id: `msg_${id}`,
    status: "pending",
    attempts: 0,
    next_attempt_at: now,
    created_at: now,
    updated_at: now,
    body
  }
}

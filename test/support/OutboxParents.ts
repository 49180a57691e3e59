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
    yield* addOrganization({ organizationId: "org_1", instanceId: "ins_1", phoneNumberId: "1", wabaId: "2" })
    yield* addWebhooks(webhookIds)
    yield* sql`INSERT INTO events ${
      sql.insert({
        id: "evt_1",
        instance_id: "ins_1",
        body: "{}",
        change_count: 1,
        received_at: new Date().toISOString()
      })
    }`
  })

/** An organization with one instance. */
export const addOrganization = (ids: {
  readonly organizationId: string
  readonly instanceId: string
  readonly phoneNumberId: string
  readonly wabaId: string
}) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const now = new Date().toISOString()
    return Effect.zipRight(
      sql`INSERT INTO organizations ${sql.insert({ id: ids.organizationId, name: "o", created_at: now })}`,
      sql`INSERT INTO instances ${
        sql.insert({
          id: ids.instanceId,
          organization_id: ids.organizationId,
          name: "i",
          phone_number_id: ids.phoneNumberId,
          waba_id: ids.wabaId,
          created_at: now
        })
      }`
    )
  })

/** More active webhooks of an instance (by default `ins_1` of `org_1`). */
export const addWebhooks = (
  ids: ReadonlyArray<string>,
  owner: { readonly organizationId: string; readonly instanceId: string } = {
    organizationId: "org_1",
    instanceId: "ins_1"
  }
) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const now = new Date().toISOString()
    return Effect.forEach(ids, (id) =>
      sql`INSERT INTO webhooks ${
        sql.insert({
          id,
          organization_id: owner.organizationId,
          instance_id: owner.instanceId,
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

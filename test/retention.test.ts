/**
 * Retention: finished deliveries, the events they carried and unrouted changes are deleted once older
 * than HUB_RETENTION; deliveries still waiting, and the events they need, are kept.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { Retention } from "../src/Delivery/Retention.js"
import { engines } from "./support/Databases.js"
import { makeReceiver } from "./support/Receivers.js"
import { heldOpen } from "./support/RowLocks.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { createWebhookId, itemsOf, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

const deliveryStatuses = (tenant: Tenant, webhookId: string) =>
  Effect.flatMap(
    TestHub,
    (hub) => hub.request("GET", `/api/webhooks/${webhookId}/deliveries`, { token: tenant.instanceToken })
  ).pipe(
    Effect.map((answer) => itemsOf(answer.body).map((d) => String(d.status)))
  )

/** Reads the delivery log until the condition holds: at once, then each time attempts are logged (bounded by a deadline). */
const until = (tenant: Tenant, webhookId: string, condition: (statuses: ReadonlyArray<string>) => boolean) =>
  untilAttemptsLogged("deliveries settled", deliveryStatuses(tenant, webhookId), condition)

const count = (table: string) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ readonly n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM ${sql(table)}`
  ).pipe(
    Effect.map((rows) => rows[0]?.n ?? 0),
    Effect.orDie
  )

/**
 * A new tenant with one webhook that received one event (a status of a message no send made): the
 * delivery succeeded. Its receiver stays up for the scope.
 */
const deliveredEvent = Effect.gen(function*() {
  const hub = yield* TestHub
  const tenant = yield* seedTenant()
  const receiver = yield* makeReceiver()
  const webhookId = yield* createWebhookId(tenant, `${receiver.url}/hook`)
  const payload = envelope([tenant.wabaId, [
    statusChange(tenant, status(wamid(), "sent", Math.floor(Date.now() / 1000)))
  ]])
  expect((yield* hub.request("POST", "/upstream/events", { json: payload })).status).toBe(200)
  yield* until(tenant, webhookId, (s) => s.length === 1 && s[0] === "succeeded")
  return { tenant, receiver, webhookId }
})

/**
 * A statement's plan as text: SQLite's query plan, or PostgreSQL's with table scans ruled out (its
 * planner reads a small table whole even beside an index: here the index must be usable).
 */
const planOf = (statement: Statement.Statement<unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => {
    const [text, params] = statement.compile()
    return sql.onDialectOrElse({
      orElse: () =>
        sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params).pipe(
          Effect.map((rows) => rows.map((row) => row.detail).join("\n"))
        ),
      pg: () =>
        sql.withTransaction(
          Effect.zipRight(
            sql`SET LOCAL enable_seqscan = off`,
            sql.unsafe<{ readonly "QUERY PLAN": string }>(`EXPLAIN ${text}`, params)
          )
        ).pipe(Effect.map((rows) => rows.map((row) => row["QUERY PLAN"]).join("\n")))
    })
  }).pipe(Effect.orDie)

for (const engine of engines) {
  layer(testHub({ engine, webhookRetry: [Duration.hours(1)] }), { excludeTestServices: true })(
    `retention (${engine})`,
    (it) => {
      it.scoped("deletes finished history past the cutoff and keeps what a waiting delivery needs", () =>
        Effect.gen(function*() {
          const hub = yield* TestHub
          const retention = yield* Retention
          const tenant = yield* seedTenant()
          const healthy = yield* makeReceiver()
          const failing = yield* makeReceiver(() => ({ status: 500 }))
          const delivered = yield* createWebhookId(tenant, `${healthy.url}/hook`)
          const waiting = yield* createWebhookId(tenant, `${failing.url}/hook`)

          // A second instance whose only webhook succeeds: its event is needed by no delivery once pruned.
          const other = yield* seedTenant()
          const otherHook = yield* createWebhookId(other, `${healthy.url}/other`)
          for (const owner of [tenant, other]) {
            const payload = envelope([owner.wabaId, [
              statusChange(owner, status(wamid(), "sent", Math.floor(Date.now() / 1000)))
            ]])
            expect((yield* hub.request("POST", "/upstream/events", { json: payload })).status).toBe(200)
          }
          yield* until(other, otherHook, (s) => s.length === 1 && s[0] === "succeeded")
          const unrouted = envelope(["999999", [
            statusChange({ phoneNumberId: "999999999", wabaId: "999999" }, status(wamid(), "sent", 1))
          ]])
          expect((yield* hub.request("POST", "/upstream/events", { json: unrouted })).status).toBe(200)
          yield* until(tenant, delivered, (s) => s.length === 1 && s[0] === "succeeded")
          yield* until(tenant, waiting, (s) => s.length === 1 && s[0] === "failed")
          const eventsBefore = yield* count("events")
          const unroutedBefore = yield* count("unrouted_events")
          expect(unroutedBefore).toBeGreaterThan(0)

          // A webhook test's Idempotency-Key, left by a test made before the cutoff.
          yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql`INSERT INTO webhook_tests ${
              sql.insert({
                webhook_id: delivered,
                idempotency_key: "k",
                delivery_id: "dlv_test",
                created_at: new Date().toISOString()
              })
            }`).pipe(Effect.orDie)
          // A replay's record and its Idempotency-Key, made before the cutoff.
          yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
            Effect.all([
              sql`INSERT INTO webhook_replays ${
                sql.insert({
                  id: "rpl_old",
                  webhook_id: delivered,
                  since: new Date(0).toISOString(),
                  until: new Date().toISOString(),
                  events: null,
                  events_queued: 0,
                  already_queued: 0,
                  next_cursor: null,
                  finished_at: new Date().toISOString(),
                  created_at: new Date().toISOString()
                })
              }`,
              sql`INSERT INTO webhook_replay_keys ${
                sql.insert({
                  webhook_id: delivered,
                  idempotency_key: "k",
                  replay_id: "rpl_old",
                  created_at: new Date().toISOString()
                })
              }`
            ])).pipe(Effect.orDie)
          // A sample of the queue's depth taken this minute.
          yield* Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql`INSERT INTO queue_depth_samples ${
                sql.insert({
                  minute: new Date().toISOString().slice(0, 16),
                  phone_number_id: tenant.phoneNumberId,
                  depth: 3
                })
              }`
          ).pipe(Effect.orDie)
          // A cutoff in the past deletes nothing.
          expect(yield* retention.prune(Date.now() - 86_400_000)).toEqual({
            deliveries: 0,
            events: 0,
            unrouted: 0,
            earlyStatuses: 0,
            deliveryCounts: 0,
            testKeys: 0,
            replays: 0,
            depthSamples: 0
          })
          const lastSuccess =
            (yield* hub.request("GET", `/api/webhooks/${delivered}`, { token: tenant.instanceToken })).body
              .last_success_at
          expect(lastSuccess).toEqual(expect.any(String))

          const pruned = yield* retention.prune(Date.now() + 120_000)
          expect(pruned.deliveries).toBeGreaterThanOrEqual(1)
          expect(pruned.unrouted).toBe(unroutedBefore)
          // The status was for a message id no send of this hub claimed: kept as an early status until now.
          expect(pruned.earlyStatuses).toBe(2)
          expect(pruned.testKeys).toBe(1)
          expect(pruned.replays).toBe(2)
          expect(pruned.depthSamples).toBe(1)
          expect(yield* count("queue_depth_samples")).toBe(0)
          expect(pruned.events).toBeGreaterThanOrEqual(1)
          expect(yield* deliveryStatuses(other, otherHook)).toEqual([])
          expect(yield* deliveryStatuses(tenant, delivered)).toEqual([])
          expect(yield* deliveryStatuses(tenant, waiting)).toEqual(["failed"])
          // The event the waiting delivery carries is kept; events no delivery needs are gone.
          expect(yield* count("events")).toBe(eventsBefore - pruned.events)
          const kept = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql<
              { readonly n: number }
            >`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM deliveries d JOIN events e ON e.id = d.event_id`).pipe(
              Effect.orDie
            )
          expect(kept[0]?.n).toBe(yield* count("deliveries"))
          expect(yield* count("unrouted_events")).toBe(0)
          expect(yield* count("delivery_attempts")).toBeGreaterThanOrEqual(1)
          // Hourly delivery counts go by the hour, but each webhook's latest success: its last_success_at stays.
          // (The first cutoff may or may not have passed the current hour's end.)
          expect(pruned.deliveryCounts + (yield* retention.prune(Date.now() + 2 * 3600_000)).deliveryCounts).toBe(1)
          const counts = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
            sql<
              { readonly webhook_id: string; readonly outcome: string }
            >`SELECT webhook_id, outcome FROM webhook_delivery_hours ORDER BY webhook_id`).pipe(Effect.orDie)
          expect(counts).toEqual(
            [{ webhook_id: delivered, outcome: "succeeded" }, { webhook_id: otherHook, outcome: "succeeded" }].sort((
              a,
              b
            ) => a.webhook_id.localeCompare(b.webhook_id))
          )
          const after = yield* hub.request("GET", `/api/webhooks/${delivered}`, { token: tenant.instanceToken })
          expect(after.body).toMatchObject({
            last_success_at: lastSuccess,
            deliveries_24h: { succeeded: 1, failed: 0, dead: 0 }
          })
        }))

      it.scoped("keeps an old event that a later replay's delivery still names", () =>
        Effect.gen(function*() {
          const retention = yield* Retention
          const sql = yield* SqlClient.SqlClient
          const { receiver, tenant, webhookId: live } = yield* deliveredEvent
          const [event] = yield* sql<{ readonly event_id: string }>`SELECT event_id FROM deliveries
            WHERE webhook_id = ${live}`.pipe(Effect.orDie)
          const eventId = event?.event_id ?? ""
          // A webhook added later, to which a replay made (an hour from now, within the retention
          // period) a delivery of that event: its row is young, its event old.
          const later = yield* createWebhookId(tenant, `${receiver.url}/later`)
          const replayed = `dlv_${Bun.randomUUIDv7("hex", Date.now() + 3_600_000)}`
          const at = new Date().toISOString()
          yield* sql`INSERT INTO deliveries ${
            sql.insert({
              id: replayed,
              webhook_id: later,
              event_id: eventId,
              message_id: `msg_${Bun.randomUUIDv7()}`,
              status: "succeeded",
              attempts: 1,
              created_at: at,
              updated_at: at
            })
          }`.pipe(Effect.orDie)

          // Past the cutoff: the live delivery goes, the event stays while the replay's delivery names it.
          const pruned = yield* retention.prune(Date.now() + 120_000)
          expect(pruned.deliveries).toBeGreaterThanOrEqual(1)
          expect(yield* deliveryStatuses(tenant, live)).toEqual([])
          const kept = yield* sql<
            { readonly id: string }
          >`SELECT d.id FROM deliveries d JOIN events e ON e.id = d.event_id
            WHERE e.id = ${eventId}`.pipe(Effect.orDie)
          expect(kept.map((row) => row.id)).toEqual([replayed])
        }))

      if (engine === "postgres") {
        it.scoped("passes over an old event a replay's chunk holds, and prunes it on the next pass", () =>
          Effect.gen(function*() {
            const retention = yield* Retention
            const sql = yield* SqlClient.SqlClient
            const hub = yield* TestHub
            // Two events of an instance without webhooks: no delivery names them.
            const tenant = yield* seedTenant()
            for (let i = 0; i < 2; i++) {
              const payload = envelope([tenant.wabaId, [
                statusChange(tenant, status(wamid(), "sent", Math.floor(Date.now() / 1000)))
              ]])
              expect((yield* hub.request("POST", "/upstream/events", { json: payload })).status).toBe(200)
            }
            const eventsOf = sql<{ readonly id: string }>`SELECT id FROM events
              WHERE instance_id = ${tenant.instanceId} ORDER BY id`.pipe(Effect.orDie)
            const stored = yield* eventsOf
            expect(stored).toHaveLength(2)
            const held = stored[0]
            // A replay's chunk holding the first, as it does until it commits (Replays/Repo.ts).
            const chunk = yield* heldOpen(sql`SELECT id FROM events WHERE id = ${held?.id ?? ""} FOR KEY SHARE`)
            const first = yield* retention.prune(Date.now() + 120_000)
            expect(yield* eventsOf).toEqual([held])
            expect(first.events).toBeGreaterThanOrEqual(1)
            yield* chunk.commit
            yield* retention.prune(Date.now() + 120_000)
            expect(yield* eventsOf).toEqual([])
          }))
      }

      it.scoped("a step that fails is logged and the others still run", () =>
        Effect.gen(function*() {
          const retention = yield* Retention
          const sql = yield* SqlClient.SqlClient
          const { tenant, webhookId } = yield* deliveredEvent
          // The first step's deletes refused by the database until the test ends.
          yield* Effect.acquireRelease(
            sql.onDialectOrElse({
              pg: () =>
                Effect.zipRight(
                  sql`CREATE FUNCTION refused_by_test() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
                  sql`CREATE TRIGGER refused_by_test BEFORE DELETE ON deliveries FOR EACH STATEMENT
                    EXECUTE FUNCTION refused_by_test()`
                ),
              orElse: () =>
                sql`CREATE TRIGGER refused_by_test BEFORE DELETE ON deliveries
                  BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`
            }),
            () =>
              sql.onDialectOrElse({
                pg: () =>
                  Effect.zipRight(
                    sql`DROP TRIGGER refused_by_test ON deliveries`,
                    sql`DROP FUNCTION refused_by_test()`
                  ),
                orElse: () => sql`DROP TRIGGER refused_by_test`
              }).pipe(Effect.orDie)
          ).pipe(Effect.orDie)

          const logged: Array<string> = []
          const capture = Logger.make(({ message }) => {
            logged.push([message].flat().map(String).join(" "))
          })
          const pruned = yield* retention.prune(Date.now() + 120_000).pipe(
            Effect.provide(
              Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Error))
            )
          )
          expect(pruned.deliveries).toBe(0)
          expect(logged).toContain(
            "Retention could not prune deliveries; the other steps ran, this one runs again next pass"
          )
          // Later steps ran: the status named a message no send made, kept as an early status until now.
          expect(pruned.earlyStatuses).toBeGreaterThanOrEqual(1)
          expect(yield* deliveryStatuses(tenant, webhookId)).toEqual(["succeeded"])
        }))

      // Early statuses of messages sent elsewhere stay until retention: the table can hold a month of
      // every status, so it is pruned in batches, oldest first, through their time's index (0036).
      it.scoped("prunes early statuses past the cutoff in batches, oldest first, through their time's index", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const retention = yield* Retention
          const tenant = yield* seedTenant()
          const row = (waMessageId: string, at: string) => ({
            instance_id: tenant.instanceId,
            wa_message_id: waMessageId,
            status: "delivered",
            status_rank: 2,
            status_at: at,
            error: null
          })
          const old = new Date(Date.now() - 2 * 86_400_000).toISOString()
          // More than one batch of 500.
          const olds = Array.from({ length: 501 }, (_, i) => row(`wamid.old${i}`, old))
          yield* sql`INSERT INTO message_status_backlog ${
            sql.insert([...olds, row("wamid.young", new Date().toISOString())])
          }`
            .pipe(Effect.orDie)

          const pruned = yield* retention.prune(Date.now() - 86_400_000)
          expect(pruned.earlyStatuses).toBe(501)
          const left = yield* sql<{ readonly wa_message_id: string }>`SELECT wa_message_id FROM message_status_backlog
            WHERE instance_id = ${tenant.instanceId}`.pipe(Effect.orDie)
          expect(left.map((r) => r.wa_message_id)).toEqual(["wamid.young"])

          const plan = yield* planOf(sql`SELECT instance_id, wa_message_id, status FROM message_status_backlog
            WHERE status_at < ${old} ORDER BY status_at LIMIT 500`)
          expect(plan).toContain("message_status_backlog_at")
        }))

      // Deleting events checks that no delivery still names them: without an index on the deliveries'
      // event that check read every delivery kept (once per event on SQLite: 500 events took seconds
      // with a hundred thousand deliveries, blocking every write; docs/PERFORMANCE.md "Retention of events").
      it.effect("finds the deliveries that name an event through an index when events are deleted", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const plan = yield* planOf(sql.onDialectOrElse({
            // What SQLite's foreign-key check reads for each event deleted.
            orElse: () => sql`SELECT 1 FROM deliveries WHERE event_id = ${"evt_1"}`,
            // What the per-statement check of migration 0034 reads once per DELETE.
            pg: () =>
              sql`SELECT EXISTS (SELECT 1 FROM deliveries c
                WHERE c.event_id = ANY (ARRAY(SELECT id FROM events WHERE id < ${"evt_1"})))`
          }))
          expect(plan).toContain("deliveries_event")
          expect(plan).not.toMatch(/SCAN deliveries\b|Seq Scan on deliveries/)
        }))
    }
  )
}

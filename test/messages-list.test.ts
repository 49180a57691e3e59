/**
 * GET /api/messages: envelope, order, pagination, filters, date ranges, validation and tenant
 * isolation; and the record updates the events feature relies on (status events, inbound messages).
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { HubClient } from "../src/Client.js"
import type { InstanceId, OrganizationId } from "../src/Domain/Ids.js"
import { encodeCursor, MAX_OFFSET, SCAN_WINDOW } from "../src/Domain/Paging.js"
import type { MessageChange } from "../src/Messages/ChangePlan.js"
import { type ListFilter, listQueries } from "../src/Messages/ListQueries.js"
import { type ReceivedMessage, type StatusUpdate } from "../src/Messages/Records.js"
import { MessagesRepo, storedRecordsQuery } from "../src/Messages/Repo.js"
import { engines } from "./support/Databases.js"
import { fieldsOf, listMessages } from "./support/Messages.js"
import { refusedWith } from "./support/Refusal.js"
import { addInstance, itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { messagesFirstPage } from "./support/TypedRequests.js"

interface Seed {
  readonly id: string
  readonly createdAt: string
  readonly status?: string
  readonly direction?: "outbound" | "inbound"
  readonly waMessageId?: string | null
  readonly to?: string
  readonly type?: string
}

let seeded = 0

/** Inserts records with chosen timestamps (the hub itself stamps them with the current time). */
const seedRecords = (
  owner: { readonly organizationId: OrganizationId; readonly instanceId: InstanceId },
  seeds: ReadonlyArray<Seed>
) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const seed of seeds) {
      const inbound = seed.direction === "inbound"
      seeded++
      yield* sql`INSERT INTO messages ${
        sql.insert({
          id: seed.id,
          organization_id: owner.organizationId,
          instance_id: owner.instanceId,
          direction: seed.direction ?? "outbound",
          wa_message_id: seed.waMessageId === undefined ? `wamid.seed${seeded}` : seed.waMessageId,
          to_number: inbound ? null : (seed.to ?? "16505551234"),
          from_number: inbound ? (seed.to ?? "16505550000") : null,
          type: seed.type ?? "text",
          status: seed.status ?? "sent",
          error: null,
          status_at: null,
          created_at: seed.createdAt,
          updated_at: seed.createdAt
        })
      }`
    }
  })

/** `count` outbound records of one status, newer than any seeded by hand, in one statement. */
const seedMany = (
  sql: SqlClient.SqlClient,
  owner: { readonly organizationId: OrganizationId; readonly instanceId: InstanceId },
  count: number,
  status: string
) =>
  sql`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${count})
    INSERT INTO messages (id, organization_id, instance_id, direction, wa_message_id, to_number, from_number, type, status, error, status_at, created_at, updated_at)
    SELECT 'msg_many_' || ${owner.instanceId} || '_' || i, ${owner.organizationId}, ${owner.instanceId}, 'outbound', NULL, '16505551234', NULL, 'text',
           ${status}, NULL, NULL, '2026-09-01T00:00:00.000Z', '2026-09-01T00:00:00.000Z' FROM n`

/** One status event, applied as a group of one. */
const applyStatus = (update: StatusUpdate) =>
  Effect.flatMap(
    MessagesRepo,
    (repo) => Effect.map(repo.applyChanges([{ _tag: "Status", update }]), ([moved]) => moved)
  )

/** One inbound message, recorded as a group of one. */
const recordInbound = (message: ReceivedMessage) =>
  Effect.flatMap(
    MessagesRepo,
    (repo) => Effect.map(repo.applyChanges([{ _tag: "Received", message }]), ([recorded]) => recorded)
  )

const idsOf = (body: Readonly<Record<string, unknown>>) => itemsOf(body).map((record) => record.id)

type ListParams = Parameters<HubClient["messages"]["list"]>[0]["urlParams"]

/**
 * GET /api/messages through the typed client (page 1 of 50 unless given). Cursors and date filters
 * stay raw (listMessages): the typed client takes a cursor decoded, not the text an answer gives, and
 * encodes a bare date as the instant it begins, which the hub then reads as an instant.
 */
const listed = (token: string, params: Partial<ListParams> = {}) =>
  Effect.flatMap(
    Effect.flatMap(TestHub, (hub) => hub.client(token)),
    (client) => client.messages.list({ urlParams: { ...messagesFirstPage, ...params } })
  )

const idsIn = (page: { readonly data: ReadonlyArray<{ readonly id: string }> }) => page.data.map((record) => record.id)

/** A second instance (and its instance token) in the tenant's organization. */
for (const engine of engines) {
  layer(testHub({ engine }))(`GET /api/messages (${engine})`, (it) => {
    it.effect("answers the envelope with records newest first (ties broken by id), page 1 and limit 50 by default", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [
          {
            id: "msg_a",
            createdAt: "2026-01-01T10:00:00.000Z",
            waMessageId: "wamid.A",
            to: "16505551111",
            type: "image",
            status: "read"
          },
          {
            id: "msg_b",
            createdAt: "2026-01-02T10:00:00.000Z",
            direction: "inbound",
            waMessageId: "wamid.B",
            to: "16505552222"
          },
          { id: "msg_c", createdAt: "2026-01-02T10:00:00.000Z", waMessageId: null, status: "failed" }
        ])
        // Nothing asked: the hub's defaults, so raw (the typed client spells out page and limit).
        const listed = yield* listMessages(tenant.instanceToken)
        expect(listed.status).toBe(200)
        expect(listed.body).toEqual({
          data: [
            // Seeded without status times: the timeline knows no step's time.
            {
              id: "msg_c",
              waMessageId: null,
              to: "16505551234",
              type: "text",
              status: "failed",
              direction: "outbound",
              createdAt: "2026-01-02T10:00:00.000Z",
              statusTimes: {}
            },
            {
              id: "msg_b",
              waMessageId: "wamid.B",
              to: "16505552222",
              type: "text",
              status: "sent",
              direction: "inbound",
              createdAt: "2026-01-02T10:00:00.000Z",
              statusTimes: {}
            },
            {
              id: "msg_a",
              waMessageId: "wamid.A",
              to: "16505551111",
              type: "image",
              status: "read",
              direction: "outbound",
              createdAt: "2026-01-01T10:00:00.000Z",
              statusTimes: {}
            }
          ],
          total: 3,
          page: 1,
          limit: 50,
          // No older record follows; `after` is the newest record's place, to poll for newer ones.
          cursors: { before: null, after: encodeCursor({ createdAt: "2026-01-02T10:00:00.000Z", id: "msg_c" }) }
        })
      }))

    it.effect("pages with page and limit; total counts every match", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(
          tenant,
          [1, 2, 3, 4, 5].map((n) => ({ id: `msg_p${n}`, createdAt: `2026-02-0${n}T00:00:00.000Z` }))
        )
        const first = yield* listed(tenant.instanceToken, { limit: 2 })
        expect(idsIn(first)).toEqual(["msg_p5", "msg_p4"])
        expect(first).toMatchObject({ total: 5, page: 1, limit: 2 })
        const third = yield* listed(tenant.instanceToken, { page: 3, limit: 2 })
        expect(idsIn(third)).toEqual(["msg_p1"])
        expect(third).toMatchObject({ total: 5, page: 3, limit: 2 })
        const beyond = yield* listed(tenant.instanceToken, { page: 4, limit: 2 })
        expect(beyond).toEqual({ data: [], total: 5, page: 4, limit: 2, cursors: { before: null, after: null } })
        const all = yield* listed(tenant.instanceToken, { limit: 100 })
        expect(idsIn(all)).toEqual(["msg_p5", "msg_p4", "msg_p3", "msg_p2", "msg_p1"])
      }))

    it.effect("walks every record with before cursors, and back with after, whatever the depth", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(
          tenant,
          [1, 2, 3, 4, 5, 6, 7].map((n) => ({ id: `msg_k${n}`, createdAt: `2026-02-0${n}T00:00:00.000Z` }))
        )
        const first = yield* listMessages(tenant.instanceToken, "limit=3")
        expect(idsOf(first.body)).toEqual(["msg_k7", "msg_k6", "msg_k5"])
        const cursors = (body: Readonly<Record<string, unknown>>) => {
          const value = body.cursors
          return typeof value === "object" && value !== null && "before" in value && "after" in value
            ? { before: value.before, after: value.after }
            : { before: undefined, after: undefined }
        }
        const second = yield* listMessages(tenant.instanceToken, `limit=3&before=${cursors(first.body).before}`)
        expect(idsOf(second.body)).toEqual(["msg_k4", "msg_k3", "msg_k2"])
        expect(second.body).toMatchObject({ total: 7, page: 1, limit: 3 })
        const last = yield* listMessages(tenant.instanceToken, `limit=3&before=${cursors(second.body).before}`)
        expect(idsOf(last.body)).toEqual(["msg_k1"])
        expect(cursors(last.body).before).toBe(null)
        // after: the records just newer than the cursor, newest first.
        const back = yield* listMessages(tenant.instanceToken, `limit=2&after=${cursors(second.body).after}`)
        expect(idsOf(back.body)).toEqual(["msg_k6", "msg_k5"])
        const newest = yield* listMessages(tenant.instanceToken, `after=${cursors(first.body).after}`)
        expect(idsOf(newest.body)).toEqual([])
        // Polling from the newest place keeps the place while nothing newer exists.
        expect(cursors(newest.body).after).toBe(cursors(first.body).after)
        yield* seedRecords(tenant, [{ id: "msg_k8", createdAt: "2026-02-08T00:00:00.000Z" }])
        expect(idsOf((yield* listMessages(tenant.instanceToken, `after=${cursors(first.body).after}`)).body)).toEqual([
          "msg_k8"
        ])
      }))

    it.effect("offset paging stops at 10,000 rows deep with a 400 that points to cursors; cursors are checked", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* listed(tenant.instanceToken, { page: MAX_OFFSET / 100 + 1, limit: 100 })
        const tooDeep = yield* refusedWith(
          listed(tenant.instanceToken, { page: MAX_OFFSET / 100 + 2, limit: 100 }),
          "BadRequest"
        )
        expect(tooDeep).toMatchObject({ statusCode: 400, error: "page_too_deep", details: [{ field: "page" }] })
        expect(tooDeep.message).toContain("cursors.before")
        // Malformed cursors and cursors with what they exclude: raw.
        const cursor = encodeCursor({ createdAt: "2026-02-01T00:00:00.000Z", id: "msg_x" })
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["before=not-a-cursor!", "before"],
          [`before=${encodeCursor({ createdAt: "yesterday", id: "msg_x" })}`, "before"],
          [`before=${cursor}&after=${cursor}`, "after"],
          [`page=2&before=${cursor}`, "page"]
        ]
        for (const [query, field] of cases) {
          const refused = yield* listMessages(tenant.instanceToken, query)
          expect(refused.status, query).toBe(400)
          expect([...fieldsOf(refused.body)], query).toEqual([field])
        }
      }))

    it.effect("totals beyond 10,000 matches are capped and flagged; the unfiltered total stays exact", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        yield* seedMany(sql, tenant, 10_002, "read")
        const unfiltered = yield* listed(tenant.instanceToken, { limit: 1 })
        expect(unfiltered).toMatchObject({ total: 10_002 })
        expect(unfiltered.total_capped).toBeUndefined()
        const read = yield* listed(tenant.instanceToken, { limit: 1, status: "read" })
        expect(read).toMatchObject({ total: 10_000, total_capped: true })
        const failed = yield* listed(tenant.instanceToken, { limit: 1, status: "failed" })
        expect(failed).toMatchObject({ total: 0, data: [], cursors: { before: null, after: null } })
      }))

    it.effect("a direction filter examines at most SCAN_WINDOW records a page and says where to go on", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [{
          id: "msg_in_old",
          createdAt: "2020-01-01T00:00:00.000Z",
          direction: "inbound",
          status: "delivered"
        }])
        yield* seedMany(sql, tenant, SCAN_WINDOW + 5, "read")
        const first = yield* listMessages(tenant.instanceToken, "direction=inbound")
        expect(first.status).toBe(200)
        // The inbound record lies past the window: this page is empty, but says where to continue.
        expect(first.body).toMatchObject({ data: [], total: 0, total_capped: true })
        const cursors = first.body.cursors
        const before = typeof cursors === "object" && cursors !== null && "before" in cursors ? cursors.before : null
        expect(typeof before).toBe("string")
        const next = yield* listMessages(tenant.instanceToken, `direction=inbound&before=${before}`)
        expect(idsOf(next.body)).toEqual(["msg_in_old"])
        expect(next.body.cursors).toMatchObject({ before: null })
      }))

    it.effect("filters by status, direction and upstream message id (camelCase or snake_case)", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [
          { id: "msg_f1", createdAt: "2026-03-01T00:00:00.000Z", status: "delivered", waMessageId: "wamid.F1" },
          { id: "msg_f2", createdAt: "2026-03-02T00:00:00.000Z", status: "failed", waMessageId: null },
          {
            id: "msg_f3",
            createdAt: "2026-03-03T00:00:00.000Z",
            status: "delivered",
            direction: "inbound",
            waMessageId: "wamid.F3"
          },
          { id: "msg_f4", createdAt: "2026-03-04T00:00:00.000Z", status: "pending", waMessageId: "wamid.F4" }
        ])
        const token = tenant.instanceToken
        const delivered = yield* listed(token, { status: "delivered" })
        expect(idsIn(delivered)).toEqual(["msg_f3", "msg_f1"])
        expect(delivered.total).toBe(2)
        expect(idsIn(yield* listed(token, { direction: "inbound" }))).toEqual(["msg_f3"])
        expect(idsIn(yield* listed(token, { direction: "outbound", status: "delivered" }))).toEqual(["msg_f1"])
        expect(idsIn(yield* listed(token, { status: "failed" }))).toEqual(["msg_f2"])
        // Pending records are out of the status index: the filter reads a window of the newest-first one.
        const pending = yield* listed(token, { status: "pending" })
        expect(pending).toMatchObject({
          total: 1,
          data: [expect.objectContaining({ id: "msg_f4", status: "pending" })]
        })
        expect(idsIn(yield* listed(token, { status: "pending", direction: "inbound" }))).toEqual([])
        expect(idsIn(yield* listed(token, { status: "pending", wa_message_id: "wamid.F4" }))).toEqual(["msg_f4"])
        expect(idsIn(yield* listed(token, { status: "delivered", wa_message_id: "wamid.F4" }))).toEqual([])
        expect(idsIn(yield* listed(token, { waMessageId: "wamid.F4" }))).toEqual(["msg_f4"])
        expect(idsIn(yield* listed(token, { wa_message_id: "wamid.F1" }))).toEqual(["msg_f1"])
        const none = yield* listed(token, { wa_message_id: "wamid.unknown" })
        expect(none).toEqual({ data: [], total: 0, page: 1, limit: 50, cursors: { before: null, after: null } })
      }))

    it.effect("filters by date: ISO 8601 timestamps or bare dates, a bare end date covering its whole day", () =>
      // Raw: the typed client cannot send a bare date (see `listed`).
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [
          { id: "msg_d1", createdAt: "2026-04-01T23:59:59.999Z" },
          { id: "msg_d2", createdAt: "2026-04-02T00:00:00.000Z" },
          { id: "msg_d3", createdAt: "2026-04-02T12:00:00.000Z" },
          { id: "msg_d4", createdAt: "2026-04-02T23:59:59.999Z" },
          { id: "msg_d5", createdAt: "2026-04-03T00:00:00.000Z" }
        ])
        const oneDay = yield* listMessages(tenant.instanceToken, "startDate=2026-04-02&endDate=2026-04-02")
        expect(idsOf(oneDay.body)).toEqual(["msg_d4", "msg_d3", "msg_d2"])
        expect(oneDay.body.total).toBe(3)
        expect(idsOf((yield* listMessages(tenant.instanceToken, "start_date=2026-04-02T12:00:00Z")).body)).toEqual([
          "msg_d5",
          "msg_d4",
          "msg_d3"
        ])
        // A timestamp end is inclusive to the millisecond.
        expect(idsOf((yield* listMessages(tenant.instanceToken, "end_date=2026-04-02T12:00:00.000Z")).body)).toEqual([
          "msg_d3",
          "msg_d2",
          "msg_d1"
        ])
        // Offsets are honoured: 02:00 at +02:00 is midnight UTC.
        expect(
          idsOf(
            (yield* listMessages(
              tenant.instanceToken,
              "startDate=2026-04-02T02:00:00%2B02:00&endDate=2026-04-02T11:59:59Z"
            )).body
          )
        ).toEqual([
          "msg_d2"
        ])
        expect(idsOf((yield* listMessages(tenant.instanceToken, "endDate=2026-04-01")).body)).toEqual(["msg_d1"])
      }))

    it.effect("refuses invalid values with a 400 naming every bad parameter", () =>
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
          ["page=0", ["page"]],
          ["page=two", ["page"]],
          ["limit=101", ["limit"]],
          ["limit=0", ["limit"]],
          ["limit=1.5", ["limit"]],
          ["status=archived", ["status"]],
          ["direction=sideways", ["direction"]],
          ["startDate=yesterday", ["startDate"]],
          ["endDate=2026-02-30", ["endDate"]],
          ["start_date=2026-13-01T00:00:00Z", ["start_date"]],
          ["waMessageId=", ["waMessageId"]],
          ["page=-1&limit=500&status=x&end_date=soon", ["page", "limit", "status", "end_date"]],
          ["startDate=2026-04-02&start_date=2026-04-03", ["start_date"]],
          ["waMessageId=wamid.A&wa_message_id=wamid.B", ["wa_message_id"]],
          ["startDate=2026-04-03&endDate=2026-04-02", ["endDate"]]
        ]
        for (const [query, fields] of cases) {
          const refused = yield* listMessages(tenant.instanceToken, query)
          expect(refused.status, query).toBe(400)
          expect(refused.body.error, query).toBe("validation_failed")
          expect([...fieldsOf(refused.body)].sort(), query).toEqual([...fields].sort())
        }
      }))

    it.effect("an instance token sees only its instance; an organization token sees all its instances and may filter by instance_id", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const sibling = yield* addInstance(tenant)
        const stranger = yield* seedTenant()
        yield* seedRecords(tenant, [{ id: "msg_i1", createdAt: "2026-05-01T00:00:00.000Z" }])
        yield* seedRecords(sibling, [{ id: "msg_i2", createdAt: "2026-05-02T00:00:00.000Z" }])
        yield* seedRecords(stranger, [{ id: "msg_i3", createdAt: "2026-05-03T00:00:00.000Z", waMessageId: "wamid.I3" }])

        expect(idsIn(yield* listed(tenant.instanceToken))).toEqual(["msg_i1"])
        expect(idsIn(yield* listed(sibling.instanceToken))).toEqual(["msg_i2"])
        expect(idsIn(yield* listed(stranger.instanceToken))).toEqual(["msg_i3"])

        const all = yield* listed(tenant.orgToken)
        expect(idsIn(all)).toEqual(["msg_i2", "msg_i1"])
        expect(all.total).toBe(2)
        expect(idsIn(yield* listed(tenant.orgToken, { instance_id: sibling.instanceId }))).toEqual(["msg_i2"])
        expect(idsIn(yield* listed(tenant.orgToken, { phone_number_id: tenant.phoneNumberId }))).toEqual(["msg_i1"])
        expect(idsIn(yield* listed(tenant.instanceToken, { instance_id: tenant.instanceId }))).toEqual(["msg_i1"])

        const foreign = yield* refusedWith(listed(tenant.orgToken, { instance_id: stranger.instanceId }), "NotFound")
        expect(JSON.stringify({ message: foreign.message, error: foreign.error, details: foreign.details })).not
          .toContain("msg_i3")
        const other = yield* refusedWith(listed(tenant.instanceToken, { instance_id: sibling.instanceId }), "Forbidden")
        expect(other.error).toBe("forbidden_instance")
        // Filtering by another tenant's upstream id finds nothing.
        expect((yield* listed(tenant.instanceToken, { waMessageId: "wamid.I3" })).total).toBe(0)
        expect((yield* listed(tenant.orgToken, { waMessageId: "wamid.I3" })).total).toBe(0)
        expect((yield* listed(stranger.orgToken, { waMessageId: "wamid.I3" })).total).toBe(1)
      }))

    it.effect("a session token cannot list messages", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* refusedWith(listed(tenant.sessionToken), "Forbidden")
      }))
  })
}

for (const engine of engines) {
  layer(testHub({ engine }))(`message records for the events feature (${engine})`, (it) => {
    it.effect("each step's time is kept for the status timeline, several steps of one group included", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [
          { id: "msg_t1", createdAt: "2026-06-01T00:00:00.000Z", status: "pending", waMessageId: "wamid.T1" },
          { id: "msg_t2", createdAt: "2026-06-01T00:00:01.000Z", status: "pending", waMessageId: "wamid.T2" }
        ])
        const update = (
          waMessageId: string,
          status: "sent" | "delivered" | "read" | "failed",
          second: number
        ): MessageChange => ({
          _tag: "Status",
          update: {
            instanceId: tenant.instanceId,
            waMessageId,
            status,
            at: `2026-06-01T00:00:${String(second).padStart(2, "0")}.000Z`
          }
        })
        const timesOf = (waMessageId: string) =>
          Effect.map(listed(tenant.instanceToken, { waMessageId }), (page) => page.data[0]?.statusTimes)
        expect(yield* timesOf("wamid.T1")).toEqual({})
        // One group: sent and delivered of T1 (both kept, not only the last), sent of T2.
        const repo = yield* MessagesRepo
        yield* repo.applyChanges([
          update("wamid.T1", "sent", 5),
          update("wamid.T2", "sent", 6),
          update("wamid.T1", "delivered", 7)
        ])
        // Later groups: read skips nothing for T1; T2 fails, then a late delivered is refused and leaves no time.
        yield* repo.applyChanges([update("wamid.T1", "read", 9), update("wamid.T2", "failed", 10)])
        yield* repo.applyChanges([update("wamid.T2", "delivered", 11)])
        expect(yield* timesOf("wamid.T1")).toEqual({
          sent: "2026-06-01T00:00:05.000Z",
          delivered: "2026-06-01T00:00:07.000Z",
          read: "2026-06-01T00:00:09.000Z"
        })
        expect(yield* timesOf("wamid.T2")).toEqual({
          sent: "2026-06-01T00:00:06.000Z",
          failed: "2026-06-01T00:00:10.000Z"
        })
        // A record from before the step times (migration 0013) shows its current status's time.
        yield* seedRecords(tenant, [{
          id: "msg_t3",
          createdAt: "2026-06-01T00:00:02.000Z",
          status: "delivered",
          waMessageId: "wamid.T3"
        }])
        const sql = yield* SqlClient.SqlClient
        yield* sql`UPDATE messages SET status_at = '2026-06-01T00:00:12.000Z' WHERE id = 'msg_t3'`
        expect(yield* timesOf("wamid.T3")).toEqual({ delivered: "2026-06-01T00:00:12.000Z" })
      }))

    it.effect("status events move a record forward only, in one conditional update", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [{
          id: "msg_s1",
          createdAt: "2026-06-01T00:00:00.000Z",
          status: "pending",
          waMessageId: "wamid.S1"
        }])
        const apply = (status: "sent" | "delivered" | "read" | "failed") =>
          applyStatus({
            instanceId: tenant.instanceId,
            waMessageId: "wamid.S1",
            status,
            at: "2026-06-01T00:00:05.000Z"
          })
        const statusNow = Effect.map(listed(tenant.instanceToken, { waMessageId: "wamid.S1" }), (page) =>
          page.data[0]?.status)

        expect(yield* apply("sent")).toBe(true)
        expect(yield* apply("sent")).toBe(false)
        expect(yield* statusNow).toBe("sent")
        expect(yield* apply("read")).toBe(true)
        expect(yield* apply("delivered")).toBe(false)
        expect(yield* apply("failed")).toBe(false)
        expect(yield* statusNow).toBe("read")
        // Unknown ids and other instances' ids change nothing.
        expect(
          yield* applyStatus({
            instanceId: tenant.instanceId,
            waMessageId: "wamid.nope",
            status: "sent",
            at: "2026-06-01T00:00:00.000Z"
          })
        ).toBe(
          false
        )
        const other = yield* seedTenant()
        expect(
          yield* applyStatus({
            instanceId: other.instanceId,
            waMessageId: "wamid.S1",
            status: "failed",
            at: "2026-06-01T00:00:00.000Z"
          })
        ).toBe(
          false
        )
      }))

    it.effect("failed is reached from any state but read, keeps the upstream error, and is never left for a lower state", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        yield* seedRecords(tenant, [
          { id: "msg_x1", createdAt: "2026-06-02T00:00:00.000Z", status: "pending", waMessageId: "wamid.X1" },
          { id: "msg_x2", createdAt: "2026-06-02T00:00:01.000Z", status: "delivered", waMessageId: "wamid.X2" }
        ])
        const error = [{ code: 131047, title: "Re-engagement message" }]
        const fail = (waMessageId: string) =>
          applyStatus({
            instanceId: tenant.instanceId,
            waMessageId,
            status: "failed",
            at: "2026-06-02T00:01:00.000Z",
            error
          })
        expect(yield* fail("wamid.X1")).toBe(true)
        expect(yield* fail("wamid.X2")).toBe(true)
        expect(
          yield* applyStatus({
            instanceId: tenant.instanceId,
            waMessageId: "wamid.X2",
            status: "delivered",
            at: "2026-06-02T00:02:00.000Z"
          })
        ).toBe(
          false
        )
        const failed = yield* listed(tenant.instanceToken, { status: "failed" })
        expect(idsIn(failed)).toEqual(["msg_x2", "msg_x1"])
        const stored = yield* sql<{ readonly error: string | null }>`SELECT error FROM messages WHERE id = 'msg_x2'`
        expect(JSON.parse(stored[0]?.error ?? "null")).toEqual(error)
      }))

    it.effect("an inbound message is recorded once, with the sender as `to`, and duplicates are ignored", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        const inbound = {
          instanceId: tenant.instanceId,
          organizationId: tenant.organizationId,
          waMessageId: "wamid.IN1",
          party: "16505559999",
          type: "image",
          at: "2026-06-03T08:30:00.000Z"
        }
        expect(yield* recordInbound(inbound)).toBe(true)
        expect(yield* recordInbound(inbound)).toBe(false)
        // The same upstream id on another instance is another message.
        expect(yield* recordInbound({ ...inbound, instanceId: other.instanceId, organizationId: other.organizationId }))
          .toBe(true)

        const inboundPage = yield* listed(tenant.instanceToken, { direction: "inbound" })
        expect(inboundPage.total).toBe(1)
        expect(inboundPage.data).toEqual([{
          id: expect.stringMatching(/^msg_/),
          waMessageId: "wamid.IN1",
          to: "16505559999",
          type: "image",
          status: "delivered",
          direction: "inbound",
          createdAt: "2026-06-03T08:30:00.000Z",
          statusTimes: { delivered: "2026-06-03T08:30:00.000Z" }
        }])
        // Status events are about outbound messages; an inbound record ignores them.
        expect(
          yield* applyStatus({
            instanceId: tenant.instanceId,
            waMessageId: "wamid.IN1",
            status: "read",
            at: "2026-06-03T08:31:00.000Z"
          })
        ).toBe(
          false
        )
      }))

    it.effect("a send through the hub is listed with the upstream id the send answered", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const tenant = yield* seedTenant()
        // Raw: `to` with its "+", which the typed client cannot send (its request is the decoded side, "+" already gone).
        const sent = yield* hub.request("POST", "/api/messages", {
          token: tenant.orgToken,
          json: { phone_number_id: tenant.phoneNumberId, to: "+16505551234", type: "text", text: { body: "hello" } }
        })
        expect(sent.status).toBe(200)
        const messages = Array.isArray(sent.body.messages) ? sent.body.messages : []
        const records = (yield* listed(tenant.orgToken)).data
        expect(records).toEqual([
          expect.objectContaining({ waMessageId: messages[0]?.id, to: "16505551234", status: "pending" })
        ])
      }))
  })
}

/**
 * "A page stays fast with a million records": each list query must walk one index range (newest first
 * for the page, so LIMIT stops early), never scan the table or sort it. Asserted on SQLite's plan, on
 * a table holding records of several instances, so the check does not depend on timing.
 */
layer(testHub())("list query plans", (it) => {
  const planOf = (statement: { readonly compile: () => readonly [string, ReadonlyArray<unknown>] }) =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const [text, params] = statement.compile()
      const rows = yield* sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params)
      return rows.map((row) => row.detail)
    })

  it.effect("page and total use the instance or organization index, without a table scan or a sort", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      const sibling = yield* addInstance(tenant)
      yield* seedRecords(
        tenant,
        Array.from(
          { length: 30 },
          (_, i) => ({ id: `msg_p${i}`, createdAt: `2026-06-01T00:00:${String(i).padStart(2, "0")}.000Z` })
        )
      )
      yield* seedRecords(
        sibling,
        Array.from(
          { length: 30 },
          (_, i) => ({ id: `msg_q${i}`, createdAt: `2026-06-02T00:00:${String(i).padStart(2, "0")}.000Z` })
        )
      )
      const base: ListFilter = {
        organizationId: tenant.organizationId,
        instanceId: tenant.instanceId,
        status: undefined,
        direction: undefined,
        waMessageId: undefined,
        createdFrom: undefined,
        createdUntil: undefined,
        page: { _tag: "Offset", offset: 0, limit: 1 }
      }
      const cursor = { createdAt: "2026-06-01T00:00:10.000Z", id: "msg_p10" }
      const cases: ReadonlyArray<readonly [ListFilter, string]> = [
        [base, "messages_instance_created"],
        [{ ...base, status: "sent" }, "messages_instance_status"],
        [{ ...base, status: "sent", direction: "outbound" }, "messages_instance_status"],
        [{ ...base, direction: "inbound" }, "messages_instance_created"],
        [{ ...base, status: "pending" }, "messages_instance_created"],
        [{ ...base, instanceId: undefined, status: "pending", direction: "outbound" }, "messages_organization_created"],
        [{
          ...base,
          createdFrom: "2026-06-01T00:00:00.000Z",
          createdUntil: { at: "2026-06-02T00:00:00.000Z", inclusive: false }
        }, "messages_instance_created"],
        [{ ...base, page: { _tag: "Before", at: cursor, limit: 10 } }, "messages_instance_created"],
        [{ ...base, status: "failed", page: { _tag: "After", at: cursor, limit: 10 } }, "messages_instance_status"],
        [{ ...base, instanceId: undefined }, "messages_organization_created"],
        [
          { ...base, instanceId: undefined, status: "delivered", page: { _tag: "Offset", offset: 20, limit: 100 } },
          "messages_organization_status"
        ],
        [{ ...base, instanceId: undefined, waMessageId: "wamid.x" }, "messages_instance_wa_message"],
        // One person's records (?user=): the party index, with or without an instance.
        [{ ...base, instanceId: undefined, user: "16505551234" }, "messages_party"],
        [{ ...base, user: "US.13491208655302741918", status: "sent" }, "messages_party"],
        [{ ...base, user: "16505551234", page: { _tag: "Before", at: cursor, limit: 10 } }, "messages_party"]
      ]
      for (const [filter, index] of cases) {
        const label = JSON.stringify(filter)
        const queries = listQueries(sql, filter)
        const page = yield* planOf(queries.page)
        const total = yield* planOf(queries.total)
        expect(
          page.some((step) => step.startsWith("SEARCH messages USING") && step.includes(` INDEX ${index} (`)),
          label
        ).toBe(true)
        // A cursor is a range of the index, not a filter over every newer record.
        if (filter.page._tag !== "Offset") {
          expect(page.some((step) => step.includes(` INDEX ${index} (`) && /created_at[<>]/.test(step)), label).toBe(
            true
          )
        }
        for (const plan of [page, total]) {
          expect(plan.filter((step) => step.startsWith("SCAN messages")), label).toEqual([])
        }
        // Nothing is sorted but the records of one upstream id, at most one per instance.
        if (filter.waMessageId === undefined) {
          expect(page.filter((step) => step.includes("TEMP B-TREE")), label).toEqual([])
        }
        if (queries.totalKind === "kept") {
          // The unfiltered total is the kept count: one row per instance, whatever the number of records.
          expect(total.every((step) => step.startsWith("SEARCH message_counts USING")), label).toBe(true)
        } else {
          expect(
            total.some((step) => step.startsWith("SEARCH messages USING") && step.includes(` INDEX ${index} (`)),
            label
          ).toBe(true)
        }
      }
      // The queries the plans were taken of are the ones the list answers with; kept counts match real ones.
      const page = yield* listQueries(sql, base).page
      // One row more than the page's limit tells whether more follow.
      expect(page.map((row) => row.id)).toEqual(["msg_p29", "msg_p28"])
      expect((yield* listQueries(sql, base).total)[0]?.total).toBe(30)
      expect((yield* listQueries(sql, { ...base, instanceId: undefined }).total)[0]?.total).toBe(60)
      const counted = yield* sql<
        { readonly n: number }
      >`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM messages WHERE organization_id = ${tenant.organizationId}`
      expect(counted[0]?.n).toBe(60)
      // The status indexes leave out pending records, which every send writes and then moves on.
      const statusIndexes = yield* sql<
        { readonly sql: string }
      >`SELECT sql FROM sqlite_master WHERE name LIKE 'messages_%_status' ORDER BY name`
      expect(statusIndexes.map((index) => index.sql)).toEqual([
        expect.stringContaining("WHERE status <> 'pending'"),
        expect.stringContaining("WHERE status <> 'pending'")
      ])
    }))

  it.effect("status events find their record through the upstream id index, which leaves out pending sends", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      yield* seedRecords(
        tenant,
        Array.from(
          { length: 10 },
          (_, i) => ({ id: `msg_w${i}`, createdAt: `2026-06-01T00:00:0${i}.000Z`, waMessageId: `wamid.w${i}` })
        )
      )
      const other = yield* seedTenant()
      yield* seedRecords(other, [{
        id: "msg_w3_other",
        createdAt: "2026-06-01T00:00:03.000Z",
        waMessageId: "wamid.w3"
      }])
      // The index is partial (migration 0004): the group's lookup by upstream id must still select it.
      const named = [{ instanceId: tenant.instanceId, waMessageId: "wamid.x" }, {
        instanceId: tenant.instanceId,
        waMessageId: "wamid.y"
      }]
      const lookup = yield* planOf(storedRecordsQuery(sql, named))
      expect(lookup).toEqual([
        expect.stringMatching(/^SCAN k VIRTUAL TABLE INDEX/),
        expect.stringMatching(
          /^SEARCH m USING INDEX messages_instance_wa_message \(instance_id=\? AND wa_message_id=\?\)$/
        )
      ])
      // It finds exactly the named pairs: the same upstream id on another instance is another record.
      expect(yield* storedRecordsQuery(sql, [...named, { instanceId: tenant.instanceId, waMessageId: "wamid.w3" }]))
        .toEqual([
          {
            id: "msg_w3",
            instance_id: tenant.instanceId,
            wa_message_id: "wamid.w3",
            direction: "outbound",
            status: "sent",
            error: null
          }
        ])
      const indexed = yield* sql<
        { readonly sql: string }
      >`SELECT sql FROM sqlite_master WHERE name = 'messages_instance_wa_message'`
      expect(indexed[0]?.sql).toContain("WHERE wa_message_id IS NOT NULL")
    }))
})

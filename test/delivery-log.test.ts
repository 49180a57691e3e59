/**
 * The delivery log, per webhook and organization-wide (GET /api/deliveries): order across webhooks,
 * scope and filters, keyset cursors, the offset cap, capped totals, the window of status=succeeded,
 * and the query plans that keep every request bounded whatever the number of deliveries.
 */
import { SqlClient, type Statement } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { DeliveryStatus } from "../src/Domain/Vocabulary.js"
import { type LogFilter, logQueries } from "../src/Webhooks/DeliveryLog.js"
import { addInstance, itemsOf, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"

interface Seed {
  readonly id: string
  readonly createdAt: string
  readonly status: DeliveryStatus
}

const FAR = "2999-01-01T00:00:00.000Z"
let events = 0

/**
 * Deliveries with chosen times and statuses. Queued ones are held by another process's lease, or
 * due far ahead, so this hub's dispatcher leaves them as they are.
 */
const seedDeliveries = (webhookId: string, instanceId: string, seeds: ReadonlyArray<Seed>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const eventId = `evt_seed${++events}`
    yield* sql`INSERT INTO events ${
      sql.insert({
        id: eventId,
        instance_id: instanceId,
        body: "{}",
        change_count: 1,
        received_at: "2026-01-01T00:00:00.000Z"
      })
    }`
    for (const seed of seeds) {
      yield* sql`INSERT INTO deliveries ${
        sql.insert({
          id: seed.id,
          webhook_id: webhookId,
          event_id: eventId,
          message_id: `msg_${seed.id}`,
          status: seed.status,
          attempts: seed.status === "pending" ? 0 : 1,
          next_attempt_at: seed.status === "pending" ? seed.createdAt : seed.status === "failed" ? FAR : null,
          lease_owner: seed.status === "pending" ? "elsewhere" : null,
          lease_expires_at: seed.status === "pending" ? FAR : null,
          created_at: seed.createdAt,
          updated_at: seed.createdAt
        })
      }`
    }
  }).pipe(Effect.orDie)

const at = (day: number, second: number) =>
  `2026-02-${String(day).padStart(2, "0")}T00:00:${String(second).padStart(2, "0")}.000Z`

const hookOf = (token: string, json: Record<string, unknown>) =>
  Effect.gen(function*() {
    const hub = yield* TestHub
    const created = yield* hub.request("POST", "/api/webhooks", {
      token,
      json: { url: "https://example.com/hook", name: "log", ...json }
    })
    expect(created.status).toBe(201)
    return String(created.body.id)
  })

const get = (token: string, path: string) => Effect.flatMap(TestHub, (hub) => hub.request("GET", path, { token }))
const ids = (body: Readonly<Record<string, unknown>>) => itemsOf(body).map((d) => String(d.id))
const cursor = (body: Readonly<Record<string, unknown>>, which: "before" | "after") => {
  const cursors = body.cursors
  const value = typeof cursors === "object" && cursors !== null && which in cursors ? Reflect.get(cursors, which) : null
  return typeof value === "string" ? value : null
}

let organizations = 0

/** Three webhooks on two instances of one organization, with interleaved deliveries of every status. */
const seedOrganization = Effect.gen(function*() {
  const tag = `o${++organizations}`
  /** A seeded delivery's id: `a4` is webhook a's fourth. */
  const id = (name: string) => `dlv_${tag}_${name}`
  const idsOf = (...names: ReadonlyArray<string>) => names.map(id)
  const tenant = yield* seedTenant()
  const sibling = yield* addInstance(tenant)
  const a = yield* hookOf(tenant.orgToken, { instance_id: tenant.instanceId })
  const b = yield* hookOf(tenant.orgToken, { instance_id: sibling.instanceId })
  const c = yield* hookOf(tenant.orgToken, { instance_id: tenant.instanceId })
  yield* seedDeliveries(a, tenant.instanceId, [
    { id: id("a1"), createdAt: at(1, 1), status: "succeeded" },
    { id: id("a2"), createdAt: at(1, 4), status: "dead" },
    { id: id("a3"), createdAt: at(1, 7), status: "pending" },
    { id: id("a4"), createdAt: at(2, 1), status: "failed" }
  ])
  yield* seedDeliveries(b, sibling.instanceId, [
    { id: id("b1"), createdAt: at(1, 2), status: "succeeded" },
    { id: id("b2"), createdAt: at(1, 4), status: "cancelled" },
    { id: id("b3"), createdAt: at(1, 8), status: "succeeded" }
  ])
  yield* seedDeliveries(c, tenant.instanceId, [
    { id: id("c1"), createdAt: at(1, 3), status: "dead" },
    { id: id("c2"), createdAt: at(1, 9), status: "pending" }
  ])
  return { tenant, sibling, a, b, c, idsOf }
})

/** Every row by following `before` cursors, `limit` at a time. */
const walk = (token: string, path: string, limit: number) =>
  Effect.gen(function*() {
    const seen: Array<string> = []
    const separator = path.includes("?") ? "&" : "?"
    let next: string | null = ""
    for (let pages = 0; next !== null && pages < 50; pages++) {
      const answer = yield* get(token, `${path}${separator}limit=${limit}${next === "" ? "" : `&before=${next}`}`)
      expect(answer.status).toBe(200)
      seen.push(...ids(answer.body))
      next = cursor(answer.body, "before")
    }
    return seen
  })

layer(testHub(), { excludeTestServices: true })("delivery log", (it) => {
  it.effect("GET /api/deliveries merges the organization's webhooks newest first; an instance token sees its instance's", () =>
    Effect.gen(function*() {
      const { a, c, idsOf, sibling, tenant } = yield* seedOrganization
      const all = yield* get(tenant.orgToken, "/api/deliveries")
      expect(all.status).toBe(200)
      expect(ids(all.body)).toEqual(idsOf("a4", "c2", "b3", "a3", "b2", "a2", "c1", "b1", "a1"))
      expect(all.body).toMatchObject({ total: 9, page: 1, limit: 50 })
      expect(all.body.total_capped).toBeUndefined()
      const [first] = itemsOf(all.body)
      expect(first).toMatchObject({
        id: idsOf("a4")[0],
        webhook_id: a,
        event_id: expect.stringMatching(/^evt_/),
        message_id: `msg_${idsOf("a4")[0]}`,
        status: "failed",
        attempt_log: []
      })

      const own = yield* get(tenant.instanceToken, "/api/deliveries")
      expect(ids(own.body)).toEqual(idsOf("a4", "c2", "a3", "a2", "c1", "a1"))
      expect(ids((yield* get(sibling.instanceToken, "/api/deliveries")).body)).toEqual(idsOf("b3", "b2", "b1"))
      expect(ids((yield* get(tenant.orgToken, `/api/deliveries?instance_id=${sibling.instanceId}`)).body)).toEqual(
        idsOf("b3", "b2", "b1")
      )
      expect(ids((yield* get(tenant.orgToken, `/api/deliveries?webhook_id=${c}`)).body)).toEqual(idsOf("c2", "c1"))
      expect(
        ids((yield* get(tenant.orgToken, `/api/deliveries?webhook_id=${c}&instance_id=${sibling.instanceId}`)).body)
      ).toEqual([])

      // Each status through its own range, merged across webhooks.
      const byStatus = (status: string) =>
        Effect.map(get(tenant.orgToken, `/api/deliveries?status=${status}`), (r) => ids(r.body))
      expect(yield* byStatus("pending")).toEqual(idsOf("c2", "a3"))
      expect(yield* byStatus("failed")).toEqual(idsOf("a4"))
      expect(yield* byStatus("dead")).toEqual(idsOf("a2", "c1"))
      expect(yield* byStatus("cancelled")).toEqual(idsOf("b2"))
      expect(yield* byStatus("succeeded")).toEqual(idsOf("b3", "b1", "a1"))
      const window = yield* get(tenant.orgToken, `/api/deliveries?since=${at(1, 3)}&until=${at(1, 8)}`)
      expect(ids(window.body)).toEqual(idsOf("a3", "b2", "a2", "c1"))
      expect(window.body.total).toBe(4)
      expect(ids((yield* get(tenant.orgToken, "/api/deliveries?since=2026-02-02&status=failed")).body)).toEqual(
        idsOf("a4")
      )
      // Instants with an offset, or without a zone (UTC), are the same instants.
      const offsets = yield* get(
        tenant.orgToken,
        `/api/deliveries?since=2026-02-01T01:00:03%2B0100&until=2026-02-01T00:00:08`
      )
      expect(ids(offsets.body)).toEqual(ids(window.body))

      // Other tenants' and other instances' webhooks are not found; another instance is forbidden to an instance token.
      const stranger = yield* seedTenant()
      expect((yield* get(stranger.orgToken, `/api/deliveries?webhook_id=${a}`)).status).toBe(404)
      expect((yield* get(sibling.instanceToken, `/api/deliveries?webhook_id=${a}`)).status).toBe(404)
      expect((yield* get(tenant.instanceToken, `/api/deliveries?instance_id=${sibling.instanceId}`)).status).toBe(403)
      expect(ids((yield* get(stranger.orgToken, "/api/deliveries")).body)).toEqual([])
      expect((yield* get(tenant.sessionToken, "/api/deliveries")).status).toBe(403)
      const invalid = yield* get(tenant.orgToken, "/api/deliveries?status=lost&since=yesterday&limit=101")
      expect(itemsOf(invalid.body, "details").map((d) => String(d.field)).sort()).toEqual(["limit", "since", "status"])
      const backwards = yield* get(tenant.orgToken, `/api/deliveries?since=${at(2, 0)}&until=${at(1, 0)}`)
      expect(backwards.body).toMatchObject({
        statusCode: 400,
        details: [{ field: "until", message: "must be after since" }]
      })
    }))

  it.effect("cursors walk every delivery once across webhooks; after answers the newer ones; offsets are capped", () =>
    Effect.gen(function*() {
      const { a, idsOf, tenant } = yield* seedOrganization
      const everything = idsOf("a4", "c2", "b3", "a3", "b2", "a2", "c1", "b1", "a1")
      expect(yield* walk(tenant.orgToken, "/api/deliveries", 2)).toEqual(everything)
      expect(yield* walk(tenant.orgToken, "/api/deliveries?status=succeeded", 1)).toEqual(idsOf("b3", "b1", "a1"))
      expect(yield* walk(tenant.orgToken, "/api/deliveries?status=pending", 1)).toEqual(idsOf("c2", "a3"))
      expect(yield* walk(tenant.instanceToken, `/api/webhooks/${a}/deliveries`, 3)).toEqual(
        idsOf("a4", "a3", "a2", "a1")
      )

      const third = yield* get(tenant.orgToken, "/api/deliveries?limit=3&page=2")
      expect(ids(third.body)).toEqual(idsOf("a3", "b2", "a2"))
      const newer = yield* get(tenant.orgToken, `/api/deliveries?limit=2&after=${cursor(third.body, "after")}`)
      expect(ids(newer.body)).toEqual(idsOf("c2", "b3"))
      const newest = yield* get(tenant.orgToken, `/api/deliveries?limit=2&after=${cursor(newer.body, "after")}`)
      expect(ids(newest.body)).toEqual(idsOf("a4"))
      const none = yield* get(tenant.orgToken, `/api/deliveries?after=${cursor(newest.body, "after")}`)
      expect(none.body).toMatchObject({ data: [], total: 9 })
      expect(cursor(none.body, "after")).toBe(cursor(newest.body, "after"))

      const deep = yield* get(tenant.orgToken, "/api/deliveries?page=102&limit=100")
      expect(deep.body).toMatchObject({ statusCode: 400, error: "page_too_deep", details: [{ field: "page" }] })
      expect(String(deep.body.message)).toContain("continue with the before cursor")
      expect((yield* get(tenant.orgToken, "/api/deliveries?page=101&limit=100")).status).toBe(200)
      const bad = yield* get(tenant.orgToken, "/api/deliveries?before=not*a*cursor")
      expect(bad.body).toMatchObject({ statusCode: 400, details: [{ field: "before" }] })
      const both = yield* get(tenant.orgToken, `/api/deliveries?page=2&before=${cursor(third.body, "before")}`)
      expect(both.body).toMatchObject({ statusCode: 400, details: [{ field: "page" }] })
    }))

  it.effect("totals beyond 10,000 are capped; status=succeeded examines a bounded window and its cursor goes on from there", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant: Tenant = yield* seedTenant()
      const hook = yield* hookOf(tenant.instanceToken, {})
      yield* seedDeliveries(hook, tenant.instanceId, [{
        id: "dlv_000_old_success",
        createdAt: "2026-02-28T00:00:00.000Z",
        status: "succeeded"
      }])
      // 20,001 dead deliveries, newer than the one success: one more than a page's window examines.
      yield* sql`WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20001)
        INSERT INTO deliveries (id, webhook_id, event_id, message_id, status, attempts, created_at, updated_at)
        SELECT 'dlv_bulk_' || printf('%06d', i), ${hook}, (SELECT event_id FROM deliveries WHERE id = 'dlv_000_old_success'),
               'msg_bulk_' || i, 'dead', 1, strftime('%Y-%m-%dT%H:%M:%fZ', '2026-03-01', '+' || i || ' seconds'),
               strftime('%Y-%m-%dT%H:%M:%fZ', '2026-03-01', '+' || i || ' seconds')
          FROM n`
      const path = `/api/webhooks/${hook}/deliveries`
      const all = yield* get(tenant.instanceToken, `${path}?limit=2`)
      expect(all.body).toMatchObject({ total: 10_000, total_capped: true })
      expect(ids(all.body)).toEqual(["dlv_bulk_020001", "dlv_bulk_020000"])
      expect((yield* get(tenant.instanceToken, `${path}?status=dead&limit=1`)).body).toMatchObject({
        total: 10_000,
        total_capped: true
      })
      const rangeTotal = yield* get(
        tenant.instanceToken,
        `${path}?status=dead&since=2026-03-01T00:00:01Z&until=2026-03-01T00:00:11Z`
      )
      expect(rangeTotal.body).toMatchObject({ total: 10 })
      expect(rangeTotal.body.total_capped).toBeUndefined()

      const succeeded = yield* get(tenant.instanceToken, `${path}?status=succeeded`)
      expect(succeeded.body).toMatchObject({ data: [], total: 0, total_capped: true })
      const onward = cursor(succeeded.body, "before")
      expect(onward).not.toBeNull()
      const found = yield* get(tenant.instanceToken, `${path}?status=succeeded&before=${onward}`)
      expect(ids(found.body)).toEqual(["dlv_000_old_success"])
      expect(cursor(found.body, "before")).toBeNull()
      // Organization-wide, the same window bounds the walk.
      const search = yield* get(tenant.orgToken, "/api/deliveries?status=succeeded")
      expect(search.body).toMatchObject({ data: [], total_capped: true })
      expect(
        ids(
          (yield* get(tenant.orgToken, `/api/deliveries?status=succeeded&before=${cursor(search.body, "before")}`)).body
        )
      ).toEqual(["dlv_000_old_success"])
    }))

  it.effect("every page, window and total reads index ranges: no table scan, no full sort", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const planOf = (statement: Statement.Statement<unknown>) =>
        Effect.gen(function*() {
          const [text, params] = statement.compile()
          const rows = yield* sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params)
          return rows.map((row) => row.detail)
        })
      const expectedIndex: Record<string, string> = {
        all: "deliveries_webhook",
        succeeded: "deliveries_webhook",
        pending: "deliveries_webhook_due",
        failed: "deliveries_webhook_failures",
        dead: "deliveries_webhook_failures",
        cancelled: "deliveries_webhook_failures"
      }
      const keyset = { createdAt: "2026-02-01T00:00:05.000Z", id: "dlv_x" }
      const pages = [
        { _tag: "Offset", offset: 20, limit: 10 },
        { _tag: "Before", at: keyset, limit: 10 },
        { _tag: "After", at: keyset, limit: 10 }
      ] as const
      for (const status of [undefined, "pending", "failed", "dead", "cancelled", "succeeded"] as const) {
        for (const page of pages) {
          for (const webhookIds of [["whk_1"], ["whk_1", "whk_2", "whk_3"]]) {
            for (
              const window of [{ since: undefined, until: undefined }, {
                since: "2026-01-01T00:00:00.000Z",
                until: "2026-03-01T00:00:00.000Z"
              }]
            ) {
              const filter: LogFilter = { webhookIds, status, ...window, page }
              const queries = logQueries(sql, filter)
              const index = expectedIndex[status ?? "all"]
              const time = status === "pending" ? "next_attempt_at" : "created_at"
              const label = `${status ?? "all"} ${page._tag} ${webhookIds.length} ${
                window.since === undefined ? "open" : "window"
              }`
              const bound = status === "succeeded" ? { createdAt: "2026-02-01T00:00:01.000Z", id: "dlv_w" } : undefined
              // Only a walked status (succeeded) has windows.
              const statements = [
                queries.pageOf(webhookIds, bound, true),
                queries.totalOf(webhookIds, 100),
                ...(status === "succeeded" ? [queries.windowEnd("whk_1", 100)] : [])
              ]
              for (const statement of statements) {
                const plan = yield* planOf(statement)
                const reads = plan.filter((step) => step.includes("deliveries"))
                expect(reads.length, label).toBeGreaterThan(0)
                for (const step of reads) {
                  // The window's end walks the whole log of one webhook (created_at), whatever the status.
                  const wanted = statement === statements[2] ? "deliveries_webhook" : index
                  const column = statement === statements[2] ? "created_at" : time
                  expect(step, `${label}: ${plan.join(" | ")}`).toMatch(
                    new RegExp(
                      `^SEARCH deliveries USING (COVERING )?INDEX ${wanted} \\(webhook_id=\\?.* AND ${column}>\\? AND ${column}<\\?\\)$`
                    )
                  )
                }
                expect(
                  plan.filter((step) => step.startsWith("SCAN deliveries") || step === "USE TEMP B-TREE FOR ORDER BY"),
                  label
                ).toEqual([])
              }
            }
          }
        }
      }
    }))

  it.effect("a page of several webhooks is a lazy merge of their ranges", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const queries = logQueries(sql, {
        webhookIds: ["whk_1", "whk_2"],
        status: "dead",
        since: undefined,
        until: undefined,
        page: { _tag: "Offset", offset: 0, limit: 10 }
      })
      const [text, params] = queries.pageOf(["whk_1", "whk_2"], undefined, true).compile()
      const plan = (yield* sql.unsafe<{ readonly detail: string }>(`EXPLAIN QUERY PLAN ${text}`, params)).map((row) =>
        row.detail
      )
      expect(plan[0]).toBe("MERGE (UNION ALL)")
    }))
})

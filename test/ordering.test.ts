/**
 * Per-person order (issue 33, point 2), through the real HTTP server on both engines: a webhook with
 * `ordering: per_contact` receives one person's deliveries one at a time, in the order the hub
 * received them; a failing one holds back only that person's, counted in the health's queued.held;
 * account-level changes are never held; an event about two persons is one delivery per person; the
 * order can be turned on and off.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, LogLevel } from "effect"
import { type Engine, engines, freshPostgresDatabase } from "./support/Databases.js"
import { makeReceiver, type ReceivedRequest, type Reply } from "./support/Receivers.js"
import { untilAttemptsLogged } from "./support/Signals.js"
import { seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { createTyped, postUpstream, readTyped, updateTyped } from "./support/TypedWebhooks.js"
import { envelope, type JsonObject, wamid } from "./support/UpstreamPayloads.js"

const ALICE = "US.1001"
const BOB = "US.2002"

/** A `messages` change: an inbound text from `person` (a BSUID), with the number Meta may add. */
const fromPerson = (tenant: Tenant, person: string, id: string): JsonObject => ({
  field: "messages",
  value: {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
    contacts: [{ profile: { name: person }, user_id: person }],
    messages: [{
      from_user_id: person,
      id,
      timestamp: String(Math.floor(Date.now() / 1000)),
      type: "text",
      text: { body: `hello from ${person}` }
    }]
  }
})

/** A status change naming two persons' messages at once (Meta batches statuses now and then). */
const twoStatuses = (tenant: Tenant, ids: readonly [string, string]): JsonObject => ({
  field: "messages",
  value: {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
    statuses: [
      { id: ids[0], status: "delivered", timestamp: "1763000000", recipient_user_id: ALICE },
      { id: ids[1], status: "delivered", timestamp: "1763000000", recipient_user_id: BOB }
    ]
  }
})

/** An account-level change: routed by business account, about no person. */
const accountUpdate = (id: string): JsonObject => ({
  field: "account_update",
  value: { phone_number: "15550783881", event: "VERIFIED_ACCOUNT", ban_info: { waba_ban_state: id } }
})

const post = (tenant: Tenant, change: JsonObject) => postUpstream(envelope([tenant.wabaId, [change]]))

/** The message, status and account-update ids a request carries, in order. */
const idsIn = (request: ReceivedRequest): ReadonlyArray<string> => {
  const body: unknown = JSON.parse(request.body)
  const ids: Array<string> = []
  const walk = (value: unknown, key: string) => {
    if (Array.isArray(value)) { for (const item of value) walk(item, key) }
    else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) walk(v, k)
    } else if (
      typeof value === "string" && ((key === "id" && value.startsWith("wamid.")) || key === "waba_ban_state")
    ) {
      ids.push(value)
    }
  }
  walk(body, "")
  return ids
}

/** The index of each request carrying `id`. */
const arrivals = (requests: ReadonlyArray<ReceivedRequest>, id: string) =>
  requests.flatMap((r, i) => (idsIn(r).includes(id) ? [i] : []))

const received = (requests: ReadonlyArray<ReceivedRequest>, ...ids: ReadonlyArray<string>) =>
  ids.every((id) => arrivals(requests, id).length > 0)

/** Whether every attempt of `first` came before the first of `then` (one at a time, in order). */
const before = (requests: ReadonlyArray<ReceivedRequest>, first: string, then: string) =>
  Math.max(...arrivals(requests, first)) < Math.min(...arrivals(requests, then))

/** A receiver failing `failing` (answered as `failure`) while `failingNow` says so, taking the rest. */
const failingFor = (failing: () => string | undefined, failure: Reply) =>
  makeReceiver((request) => {
    const id = failing()
    return id !== undefined && idsIn(request).includes(id) ? failure : { status: 200 }
  })

/** Three quick retries: a delivery refused four times is dead at once (a Retry-After asks for longer). */
const orderingHub = (engine: Engine) =>
  testHub(
    { engine, webhookRetry: [Duration.millis(10), Duration.millis(10), Duration.millis(10)] },
    Logger.minimumLogLevel(LogLevel.Error)
  )

for (const engine of engines) {
  layer(orderingHub(engine), { excludeTestServices: true })(`per-person order (${engine})`, (it) => {
    it.scoped(
      "a failing delivery holds back only its person's later ones, which arrive in order once it succeeds; others flow",
      () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const [a1, a2, a3, b1, b2] = [wamid(), wamid(), wamid(), wamid(), wamid()]
          let failing: string | undefined = a1
          // Alice's first message is refused once, with a Retry-After that leaves time to look at the held ones.
          const receiver = yield* makeReceiver((request) => {
            if (failing === undefined || !idsIn(request).includes(failing)) return { status: 200 }
            failing = undefined
            return { status: 503, headers: { "retry-after": "3" } }
          })
          const unordered = yield* failingFor(() => a1, { status: 503, headers: { "retry-after": "30" } })
          const ordered = yield* createTyped(tenant.orgToken, {
            instance_id: tenant.instanceId,
            url: receiver.url,
            name: "ordered",
            ordering: "per_contact"
          })
          expect(ordered.ordering).toBe("per_contact")
          const plain = yield* createTyped(tenant.orgToken, {
            instance_id: tenant.instanceId,
            url: unordered.url,
            name: "unordered"
          })
          expect(plain.ordering).toBe("none")

          yield* post(tenant, fromPerson(tenant, ALICE, a1))
          yield* receiver.waitFor("Alice's first refused", (rs) => received(rs, a1))
          yield* post(tenant, fromPerson(tenant, ALICE, a2))
          yield* post(tenant, fromPerson(tenant, BOB, b1))
          yield* post(tenant, accountUpdate("acct-1"))
          yield* post(tenant, fromPerson(tenant, ALICE, a3))
          yield* post(tenant, fromPerson(tenant, BOB, b2))

          // Bob's and the account's go while Alice's first waits for its retry; Alice's later ones wait.
          const meanwhile = yield* receiver.waitFor("Bob's and the account's", (rs) => received(rs, b1, b2, "acct-1"))
          expect(received(meanwhile, a2) || received(meanwhile, a3)).toBe(false)
          expect(before(meanwhile, b1, b2)).toBe(true)
          const waiting = yield* readTyped(tenant.orgToken, ordered.id)
          expect(waiting.queued).toMatchObject({ held: 2, failed: 1 })
          // The unordered webhook took Alice's later ones at once, its first still failing.
          yield* unordered.waitFor("the unordered webhook's", (rs) => received(rs, a2, a3, b1, b2))
          expect((yield* readTyped(tenant.orgToken, plain.id)).queued.held).toBe(0)

          // The retry succeeds: Alice's follow, one at a time, in order.
          const all = yield* receiver.waitFor("Alice's, in order", (rs) => received(rs, a2, a3), Duration.seconds(15))
          expect(arrivals(all, a1)).toHaveLength(2)
          expect(before(all, a1, a2)).toBe(true)
          expect(before(all, a2, a3)).toBe(true)
          // Once the last attempt is logged, nothing is queued or held.
          yield* untilAttemptsLogged(
            "the ordered webhook's queue empties",
            readTyped(tenant.orgToken, ordered.id),
            (record) => record.queued.pending === 0 && record.queued.held === 0 && record.queued.failed === 0
          )
        })
    )

    it.scoped("a delivery that dies lets its person's next one go", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const [a1, a2] = [wamid(), wamid()]
        const receiver = yield* failingFor(() => a1, { status: 500 })
        const ordered = yield* createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: receiver.url,
          name: "ordered",
          ordering: "per_contact"
        })
        yield* post(tenant, fromPerson(tenant, ALICE, a1))
        yield* post(tenant, fromPerson(tenant, ALICE, a2))
        const requests = yield* receiver.waitFor("Alice's second", (rs) => received(rs, a2))
        // Four attempts (the first and three retries), then dead; only then the second.
        expect(arrivals(requests, a1)).toHaveLength(4)
        expect(before(requests, a1, a2)).toBe(true)
        expect((yield* readTyped(tenant.orgToken, ordered.id)).deliveries_24h.dead).toBe(1)
      }))

    it.scoped("an event about two persons is one delivery per person, each with only that person's statuses", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const ids = [wamid(), wamid()] as const
        const receiver = yield* makeReceiver()
        const unordered = yield* makeReceiver()
        yield* createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: receiver.url,
          name: "ordered",
          ordering: "per_contact"
        })
        yield* createTyped(tenant.orgToken, { instance_id: tenant.instanceId, url: unordered.url, name: "plain" })
        const answer = yield* post(tenant, twoStatuses(tenant, ids))
        expect(answer.deliveries).toBe(3)
        const split = yield* receiver.waitFor("both persons'", (rs) => rs.length === 2)
        expect(split.map(idsIn).sort()).toEqual([[ids[0]], [ids[1]]].sort())
        // Each envelope names one person only.
        expect(split.map((r) => r.body.includes(ALICE) !== r.body.includes(BOB))).toEqual([true, true])
        const whole = yield* unordered.waitFor("the whole event", (rs) => rs.length === 1)
        expect(idsIn(whole[0] ?? { path: "", headers: {}, body: "{}" })).toEqual([...ids])
      }))

    it.scoped("ordering is patched on and off: turned off, the held deliveries go at once", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const [a1, a2, a3] = [wamid(), wamid(), wamid()]
        // Alice's first waits for a retry far off: her later ones stay held until the order is turned off.
        const receiver = yield* failingFor(() => a1, { status: 503, headers: { "retry-after": "600" } })
        const created = yield* createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: receiver.url,
          name: "switched"
        })
        expect(created.ordering).toBe("none")
        const on = yield* updateTyped(tenant.orgToken, created.id, { ordering: "per_contact" })
        expect(on.ordering).toBe("per_contact")
        yield* post(tenant, fromPerson(tenant, ALICE, a1))
        yield* receiver.waitFor("Alice's first refused", (rs) => received(rs, a1))
        yield* post(tenant, fromPerson(tenant, ALICE, a2))
        yield* post(tenant, fromPerson(tenant, ALICE, a3))
        expect((yield* readTyped(tenant.orgToken, created.id)).queued).toMatchObject({ held: 2, failed: 1 })
        expect(received(receiver.requests, a2)).toBe(false)

        const off = yield* updateTyped(tenant.orgToken, created.id, { ordering: "none" })
        expect(off.ordering).toBe("none")
        expect(off.queued.held).toBe(0)
        yield* receiver.waitFor("Alice's later ones, released", (rs) => received(rs, a2, a3))
        // Alice's first still waits for its retry.
        expect(arrivals(receiver.requests, a1)).toHaveLength(1)
      }))
  })
}

/** A status of message `id` sent to person `n` of many (by number and BSUID). */
const statusTo = (tenant: Tenant, n: number): JsonObject => ({
  field: "messages",
  value: {
    messaging_product: "whatsapp",
    metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
    statuses: [{
      id: wamid(),
      status: "sent",
      timestamp: String(Math.floor(Date.now() / 1000)),
      recipient_id: String(15550000000 + n),
      recipient_user_id: `US.${n}`
    }]
  }
})

for (const engine of engines) {
  layer(orderingHub(engine), { excludeTestServices: true })(`ordering switched under load (${engine})`, (it) => {
    it.scoped(
      "ordering patched on and off while deliveries flow: every PATCH answers 200, every delivery arrives",
      () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          // A receiver a little slow, so lanes fill up and rounds advance them while the PATCHes run.
          const receiver = yield* makeReceiver(() => ({ status: 200, delayMs: 5 }))
          const webhooks = yield* Effect.forEach(
            [0, 1, 2],
            (w) => createTyped(tenant.orgToken, { instance_id: tenant.instanceId, url: receiver.url, name: `w${w}` })
          )
          let posts = 0
          for (const ordering of ["per_contact", "none", "per_contact", "none"] as const) {
            // Each PATCH runs while the last posts' deliveries are still under way.
            for (const webhook of webhooks) {
              expect((yield* updateTyped(tenant.orgToken, webhook.id, { ordering })).ordering).toBe(ordering)
            }
            yield* Effect.forEach(
              Array.from({ length: 150 }, (_, n) => n),
              (n) => post(tenant, statusTo(tenant, n % 50)),
              { concurrency: 20 }
            )
            posts += 150
          }
          yield* receiver.waitFor(
            "every delivery",
            () => receiver.distinctIds().size >= posts * webhooks.length,
            Duration.seconds(30)
          )
          for (const webhook of webhooks) {
            expect((yield* readTyped(tenant.orgToken, webhook.id)).queued.held).toBe(0)
          }
        }),
      { timeout: 60_000 }
    )
  })
}

describe("ordering field", () => {
  layer(orderingHub("sqlite"), { excludeTestServices: true })("validation", (it) => {
    it.effect("an unknown ordering is a 400 naming the field", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const hub = yield* TestHub
        const answer = yield* hub.request("POST", "/api/webhooks", {
          token: tenant.orgToken,
          json: { instance_id: tenant.instanceId, url: "https://example.com/h", name: "x", ordering: "per_person" }
        })
        expect(answer.status).toBe(400)
        expect(answer.text).toContain("ordering")
      }))
  })
})

/** Two replicas on one fresh PostgreSQL database (see test/fleet.test.ts): their contexts. */
const twoReplicas = Effect.gen(function*() {
  const url = yield* freshPostgresDatabase
  const replica = () =>
    Layer.build(
      testHub({
        engine: "postgres",
        databaseFile: url,
        webhookRetry: Array.from({ length: 5 }, () => Duration.millis(10))
      }, Logger.minimumLogLevel(LogLevel.Error))
    )
  return [yield* replica(), yield* replica()] as const
})

describe("per-person order in a fleet of two replicas on PostgreSQL", () => {
  it.scopedLive("posts spread over both replicas, some refused once: each person's arrive one at a time, in order", () =>
    Effect.gen(function*() {
      const replicas = yield* twoReplicas
      const [a] = replicas
      const tenant = yield* Effect.provide(seedTenant(), a)
      const persons = [ALICE, BOB, "US.3003"]
      // Per person: what was taken, in order, and whether one of theirs was in flight when another came.
      const taken = new Map<string, Array<string>>()
      const open = new Map<string, number>()
      let overlaps = 0
      const refusedOnce = new Set<string>()
      const receiver = yield* makeReceiver(async (request, index) => {
        const person = persons.find((p) => request.body.includes(p)) ?? ""
        const [id] = idsIn(request)
        if ((open.get(person) ?? 0) > 0) overlaps++
        // Every fourth delivery is refused once; decided (and what is taken noted) before the test is told of the request.
        const refuse = index % 4 === 0 && id !== undefined && !refusedOnce.has(id)
        if (refuse && id !== undefined) refusedOnce.add(id)
        else if (id !== undefined) taken.set(person, [...(taken.get(person) ?? []), id])
        open.set(person, (open.get(person) ?? 0) + 1)
        // A moment in flight, so that another delivery of the same person meanwhile would be seen.
        await Bun.sleep(2)
        open.set(person, (open.get(person) ?? 1) - 1)
        // A refused one is retried a second later, while the person's next ones are posted: they must wait.
        return refuse ? { status: 503, headers: { "retry-after": "1" } } : { status: 200 }
      })
      const created = yield* Effect.provide(
        createTyped(tenant.orgToken, {
          instance_id: tenant.instanceId,
          url: receiver.url,
          name: "fleet-ordered",
          ordering: "per_contact"
        }),
        a
      )
      expect(created.ordering).toBe("per_contact")
      const posted = new Map<string, Array<string>>()
      for (let n = 0; n < 30; n++) {
        const person = persons[n % persons.length] ?? ALICE
        const id = wamid()
        posted.set(person, [...(posted.get(person) ?? []), id])
        // Each post answered before the next: the hub receives them in this order, on either replica.
        yield* Effect.provide(post(tenant, fromPerson(tenant, person, id)), replicas[n % 2] ?? a)
      }
      yield* receiver.waitFor(
        "every delivery taken",
        () => [...taken.values()].reduce((sum, ids) => sum + ids.length, 0) >= 30,
        Duration.seconds(20)
      )
      expect(refusedOnce.size).toBeGreaterThan(0)
      expect(overlaps).toBe(0)
      for (const person of persons) expect(taken.get(person)).toEqual(posted.get(person))
    }))
})

/**
 * Three hub processes (`bun src/main.ts serve`) on one PostgreSQL database, upstream posts spread
 * over them, three webhooks: every change reaches every webhook; without faults no webhook-id
 * arrives twice; a replica killed with SIGKILL while its deliveries are in flight loses nothing
 * (its leases expire and the others send them); a replica told to stop reports not-ready while it
 * drains, and what it could not finish is sent by the others.
 */
import { expect, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import { freshPostgresDatabase } from "./support/Databases.js"
import { demoTokensText } from "./support/DemoTokens.js"
import { type HubProcess, startHubProcess } from "./support/HubProcess.js"
import { makeReceiver, type ReceivedRequest, type Reply } from "./support/Receivers.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

/** The demo instance the sandbox creates (Cli/Bootstrap.ts). */
const DEMO = { phoneNumberId: "100000000000001", wabaId: "200000000000001" }

/** One request; a refused connection is status 0 (a replica that has stopped). */
const call = (
  hub: HubProcess,
  method: string,
  path: string,
  options: { readonly token?: string; readonly json?: unknown } = {}
) =>
  Effect.promise(() =>
    attempt(hub, method, path, options).catch((error: unknown) => ({ status: 0, text: String(error) }))
  )

const attempt = (
  hub: HubProcess,
  method: string,
  path: string,
  options: { readonly token?: string; readonly json?: unknown }
) =>
  (async () => {
    const response = await fetch(`${hub.baseUrl}${path}`, {
      method,
      headers: {
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        ...(options.json === undefined ? {} : { "content-type": "application/json" })
      },
      ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) })
    })
    const text = await response.text()
    return { status: response.status, text }
  })()

/** The status ids (one per change posted here) a delivery carried. */
const changeIds = (request: ReceivedRequest): ReadonlyArray<string> => {
  const body: unknown = JSON.parse(request.body)
  const ids: Array<string> = []
  const walk = (value: unknown, key: string | undefined) => {
    if (Array.isArray(value)) { for (const item of value) walk(item, key) }
    else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (key === "statuses" && k === "id" && typeof v === "string") ids.push(v)
        walk(v, k === "id" ? key : k)
      }
    }
  }
  walk(body, undefined)
  return ids
}

const receivedChanges = (requests: ReadonlyArray<ReceivedRequest>) => new Set(requests.flatMap(changeIds))

it.live(
  "three replicas on one database: every change reaches every webhook, a killed replica loses nothing, a stopping one drains",
  () =>
    Effect.gen(function*() {
      const url = yield* freshPostgresDatabase
      const env = {
        HUB_DB: url,
        HUB_DB_POOL_SIZE: "4",
        HUB_SECRET_KEY: "ab".repeat(32),
        HUB_SANDBOX_STATUS_DELAY: "1h",
        HUB_WEBHOOK_TIMEOUT_MS: "1500",
        HUB_DISPATCH_LEASE_MARGIN: "500ms",
        HUB_WEBHOOK_RETRY: "200ms,500ms,1s,2s",
        HUB_DISPATCH_DRAIN_TIMEOUT: "3s",
        HUB_SHUTDOWN_DELAY: "1s"
      }
      // Started together on an empty database: the migrations and the sandbox's demo are made once.
      const replicas = yield* Effect.all([0, 1, 2].map(() => startHubProcess(env)), { concurrency: 3 })
      const printed = replicas.filter((r) => r.output().includes("Sandbox ready"))
      expect(printed).toHaveLength(1)
      const token = /instance token\s+(\S+)/.exec(demoTokensText(printed[0]?.output() ?? ""))?.[1] ?? ""
      const [r0, r1, r2] = replicas
      if (r0 === undefined || r1 === undefined || r2 === undefined) return yield* Effect.dieMessage("three replicas")

      let mode: "answer" | "slow" | "hang" = "answer"
      const reply = (): Reply =>
        mode === "answer" ? { status: 200 } : mode === "slow" ? { status: 200, delayMs: 300 } : "hang"
      const receivers = yield* Effect.all([reply, reply, reply].map((r) => makeReceiver(r)))
      for (const [i, receiver] of receivers.entries()) {
        const created = yield* call(replicas[i] ?? r0, "POST", "/api/webhooks", {
          token,
          json: { url: receiver.url, name: `receiver ${i}` }
        })
        expect(created.status).toBe(201)
      }

      /** Posts `count` changes, each its own upstream post, to the given replicas in turn; their ids. */
      const post = (count: number, to: ReadonlyArray<HubProcess>) =>
        Effect.forEach(Array.from({ length: count }, (_, i) => i), (i) => {
          const id = wamid()
          return Effect.map(
            call(to[i % to.length] ?? r0, "POST", "/upstream/events", {
              json: envelope([DEMO.wabaId, [statusChange(DEMO, status(id, "sent", 1750263773))]])
            }),
            (answer) => {
              expect(answer.status).toBe(200)
              return id
            }
          )
        }, { concurrency: 6 })

      const everyWebhookHas = (ids: ReadonlyArray<string>, what: string) =>
        Effect.forEach(receivers, (receiver) =>
          receiver.waitFor(what, (requests) => {
            const got = receivedChanges(requests)
            return ids.every((id) => got.has(id))
          }, Duration.seconds(30)), { discard: true })

      // 1. No faults: posts spread over the three replicas; every webhook gets every change, once.
      const calm = yield* post(45, replicas)
      yield* everyWebhookHas(calm, "every change of the calm run")
      for (const receiver of receivers) {
        expect(receiver.requests).toHaveLength(45)
        expect(receiver.distinctIds().size).toBe(45)
      }

      // 2. SIGKILL while deliveries are in flight on the killed replica: nothing is lost.
      mode = "slow"
      const before = receivers.map((r) => r.requests.length)
      const killed = yield* post(30, [r0])
      yield* receivers[0]?.waitFor("deliveries in flight from the replica to kill", (requests) =>
        requests.length >= (before[0] ?? 0) + 3) ?? Effect.void
      r0.kill("SIGKILL")
      yield* Effect.promise(() =>
        r0.exited
      )
      mode = "answer"
      const after = yield* post(15, [r1, r2])
      yield* everyWebhookHas([...calm, ...killed, ...after], "every change, the killed replica's included")

      // 3. SIGTERM while a delivery hangs: /ready reports not-ready while the replica drains, and
      // what it released is sent by the last replica.
      mode = "hang"
      const drained = yield* post(1, [r1])
      yield* receivers[0]?.waitFor("the hanging delivery", (requests) =>
        receivedChanges(requests).has(drained[0] ?? "")) ?? Effect.void
      r1.kill("SIGTERM")
      const ready = yield* call(r1, "GET", "/ready").pipe(
        Effect.filterOrFail((answer) =>
          answer.status === 503, () => "still ready"),
        // A poll: the replica is another process, so no signal of its own reaches this one.
        Effect.retry(Schedule.spaced(Duration.millis(20))),
        Effect.timeout(Duration.seconds(5))
      )
      expect(JSON.parse(ready.text)).toMatchObject({ statusCode: 503, error: "draining" })
      expect((yield* call(r1, "GET", "/health")).status).toBe(200)
      mode = "answer"
      expect(yield* Effect.promise(() => r1.exited)).toBe(0)
      // Each webhook got the change twice: the attempt cut short by the drain, then the resend.
      yield* Effect.forEach(receivers, (receiver) =>
        receiver.waitFor("the resend of the drained replica's delivery", (requests) =>
          requests.filter((r) =>
            changeIds(r).includes(drained[0] ?? "")
          ).length >= 2, Duration.seconds(30)), { discard: true })
      const survivor = yield* call(r2, "GET", "/ready")
      expect(survivor.status).toBe(200)
    }).pipe(Effect.scoped),
  { timeout: 120_000 }
)

/**
 * Crash safety with a real hub process: events are committed, deliveries are in flight, the process
 * is killed with SIGKILL, restarted on the same database, and every event still reaches every webhook
 * at least once (receivers count distinct webhook-id values). Then SIGTERM stops it gracefully.
 */
import { expect, it } from "@effect/vitest"
import { Database } from "bun:sqlite"
import { Duration, Effect, Schedule } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { DEMO_PHONE_NUMBER_ID, DEMO_WABA_ID } from "../src/Cli/Bootstrap.js"
import { demoTokensText } from "./support/DemoTokens.js"
import { type HubProcess, startHubProcess } from "./support/HubProcess.js"
import { checkedFetch } from "./support/OpenApiCheck.js"
import { makeReceiver } from "./support/Receivers.js"
import { itemsOf, parseObject } from "./support/TestHub.js"
import { envelope, status, statusChange } from "./support/UpstreamPayloads.js"

const EVENTS = 40
/** Deliveries per webhook held open by the receivers when the hub is killed (the per-webhook limit). */
const IN_FLIGHT = 4
const DEADLINE = Duration.seconds(20)

const INSTANCE_TOKEN = /instance token\s+(mhk_\S+)/

const call = (
  hub: HubProcess,
  method: string,
  path: string,
  options: { readonly token?: string; readonly json?: unknown } = {}
) =>
  Effect.promise(async () => {
    const response = await checkedFetch(`${hub.baseUrl}${path}`, {
      method,
      headers: {
        ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
        ...(options.json === undefined ? {} : { "content-type": "application/json" })
      },
      ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) })
    })
    return { status: response.status, body: parseObject(await response.text()) }
  })

it.live(
  "a hub killed with SIGKILL while deliveries are in flight delivers every event to every webhook after a restart",
  () =>
    Effect.gen(function*() {
      const folder = mkdtempSync(join(tmpdir(), "hub-crash-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
      const env = {
        HUB_DB: join(folder, "hub.sqlite"),
        HUB_UPSTREAM: "sandbox",
        HUB_WEBHOOK_ALLOW_PRIVATE: "true",
        HUB_LOG_FORMAT: "json",
        // Long enough that no held attempt times out (and is retried) before the kill, on a loaded machine too.
        HUB_WEBHOOK_TIMEOUT_MS: "4000",
        HUB_WEBHOOK_RETRY: "50ms,100ms,200ms,400ms,800ms",
        HUB_DISPATCH_PER_WEBHOOK: String(IN_FLIGHT),
        HUB_DISPATCH_LEASE_MARGIN: "500ms"
      }

      // Before the kill the receivers hold every request open; afterwards they answer at once.
      let crashed = false
      const reply = () => (crashed ? { status: 200 } : "hang" as const)
      const receivers = [yield* makeReceiver(reply), yield* makeReceiver(reply)]

      const first = yield* startHubProcess(env).pipe(Effect.orDie)
      // The sandbox's first start prints ready-to-use tokens.
      const token = INSTANCE_TOKEN.exec(demoTokensText(first.output()))?.[1] ?? ""
      for (const receiver of receivers) {
        const created = yield* call(first, "POST", "/api/webhooks", {
          token,
          json: { url: receiver.url, name: "crash" }
        })
        expect(created.status).toBe(201)
      }
      const number = { phoneNumberId: DEMO_PHONE_NUMBER_ID, wabaId: DEMO_WABA_ID }
      for (let i = 0; i < EVENTS; i++) {
        const payload = envelope([DEMO_WABA_ID, [
          statusChange(number, status(`wamid.CRASH${i}`, "sent", 1750263773 + i))
        ]])
        const posted = yield* call(first, "POST", "/upstream/events", { json: payload })
        expect(posted.status).toBe(200)
        expect(posted.body).toMatchObject({ accepted: 1, deliveries: 2 })
      }
      for (const receiver of receivers) {
        yield* receiver.waitFor("deliveries in flight", (r) => r.length === IN_FLIGHT, DEADLINE)
      }

      first.kill("SIGKILL")
      // Killed, not exited: a signal's exit status is 128 + its number (9).
      expect(
        yield* Effect.promise(() => first.exited)
      ).toBe(137)
      crashed = true
      // What was in flight at the kill: leased by the dead process, never answered.
      const inFlightAtKill = receivers.map((receiver) => new Set(receiver.distinctIds()))
      const receivedBeforeRestart = receivers.map((receiver) => receiver.requests.length)
      for (const ids of inFlightAtKill) expect(ids.size).toBe(IN_FLIGHT)

      const second = yield* startHubProcess(env).pipe(Effect.orDie)
      for (const receiver of receivers) {
        yield* receiver.waitFor("every event", () => receiver.distinctIds().size === EVENTS, DEADLINE)
      }
      // The restart recovered the deliveries the dead process held: each arrives again, with the same webhook-id.
      yield* Effect.forEach(receivers, (receiver, i) =>
        receiver.waitFor("the deliveries held at the kill, sent again", (requests) => {
          const resent = new Set(
            requests.slice(receivedBeforeRestart[i]).map((request) =>
              request.headers["webhook-id"]
            )
          )
          return [...(inFlightAtKill[i] ?? [])].every((id) => resent.has(id))
        }, DEADLINE), { discard: true })

      // Every delivery ends succeeded (the hub records it just after the receiver answers).
      const webhooks = yield* call(second, "GET", "/api/webhooks", { token })
      for (const webhook of itemsOf(webhooks.body)) {
        yield* call(second, "GET", `/api/webhooks/${webhook.id}/deliveries?status=succeeded&limit=1`, { token }).pipe(
          Effect.filterOrFail((done) =>
            done.body.total === EVENTS, () => "not yet"),
          // A poll: the hub runs in another process, so no signal of its own reaches this one.
          Effect.retry(Schedule.spaced(Duration.millis(20))),
          Effect.timeoutFail({
            duration: DEADLINE,
            onTimeout: () => new Error("not every delivery was recorded as succeeded")
          }),
          Effect.orDie
        )
      }
      // SIGTERM then stops the hub gracefully and promptly: a clean exit, nothing left leased.
      second.kill("SIGTERM")
      const code = yield* Effect.promise(() => second.exited).pipe(
        Effect.timeoutFail({
          duration: Duration.seconds(10),
          onTimeout: () => new Error("the hub did not stop within 10 s")
        }),
        Effect.orDie
      )
      expect(code).toBe(0)
      const database = new Database(env.HUB_DB, { readonly: true })
      const leased = database.query("SELECT COUNT(*) AS n FROM deliveries WHERE lease_owner IS NOT NULL").get()
      database.close()
      expect(leased).toEqual({ n: 0 })
    }).pipe(Effect.scoped),
  30_000
)

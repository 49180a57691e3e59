/**
 * Logs an operator can use: each delivery attempt's outcome (success at debug, a failure to retry
 * at warn, dead or a disabled webhook at error) with its webhook, delivery, attempt, status and
 * latency; upstream refusals at warn with the Graph code, subcode and fbtrace_id under the request
 * id; and the pretty format's one line per record. Logs are captured through a test Logger.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Cause, Duration, Effect, HashMap, Layer, Logger, LogLevel, Option } from "effect"
import { jsonLine, prettyLine } from "../src/Logging.js"
import { makeReceiver } from "./support/Receivers.js"
import { makeSignal, untilAfterEachSignal } from "./support/Signals.js"
import { createWebhookId, seedTenant, type Tenant, TestHub, testHub } from "./support/TestHub.js"
import { envelope, status, statusChange, wamid } from "./support/UpstreamPayloads.js"

interface Line {
  readonly level: string
  readonly message: string
  readonly fields: Readonly<Record<string, unknown>>
}

const lines: Array<Line> = []
/** Fires as the hub logs each line. */
const logged = makeSignal()
const capture = Logger.make(({ annotations, logLevel, message }) => {
  lines.push({
    level: logLevel.label,
    message: [message].flat().map(String).join(" "),
    fields: Object.fromEntries(HashMap.toEntries(annotations))
  })
  logged.fire()
})

/** Waits until a captured line satisfies the condition, looking again as each line is logged; dies after the deadline. */
const lineWhere = (what: string, condition: (line: Line) => boolean) =>
  untilAfterEachSignal(
    logged.changes,
    `a log line: ${what}`,
    Effect.sync(() => Option.fromNullable(lines.find(condition)))
  )

const postEvent = (tenant: Tenant) =>
  Effect.flatMap(
    TestHub,
    (hub) =>
      hub.request("POST", "/upstream/events", {
        json: envelope([tenant.wabaId, [statusChange(tenant, status(wamid(), "sent", 1750263773))]])
      })
  )

const loggingHub = testHub(
  { webhookRetry: [Duration.millis(10)], sandboxStatusDelay: Duration.hours(1), logLevel: LogLevel.Debug },
  Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Debug))
)

layer(loggingHub, { excludeTestServices: true })("operator logs", (it) => {
  it.scoped("every delivery attempt's outcome, with webhook, delivery, attempt, status and latency", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const fine = yield* makeReceiver(() => ({ status: 204 }))
      const failing = yield* makeReceiver(() => ({ status: 500 }))
      const gone = yield* makeReceiver(() => ({ status: 410 }))
      const fineHook = yield* createWebhookId(tenant, fine.url)
      const failingHook = yield* createWebhookId(tenant, failing.url)
      const goneHook = yield* createWebhookId(tenant, gone.url)
      expect((yield* postEvent(tenant)).body).toMatchObject({ deliveries: 3 })

      const succeeded = yield* lineWhere("a success", (l) => l.fields.webhookId === fineHook)
      expect(succeeded).toMatchObject({
        level: "DEBUG",
        message: "Webhook delivery succeeded",
        fields: {
          webhookId: fineHook,
          deliveryId: expect.stringMatching(/\w/),
          attempt: 1,
          status: 204,
          latencyMs: expect.any(Number)
        }
      })

      // A 500: retried once (HUB_WEBHOOK_RETRY has one delay here), then dead.
      const retried = yield* lineWhere(
        "a failure to retry",
        (l) => l.fields.webhookId === failingHook && l.fields.attempt === 1
      )
      expect(retried).toMatchObject({
        level: "WARN",
        message: "Webhook delivery failed; it will be retried",
        fields: {
          attempt: 1,
          status: 500,
          latencyMs: expect.any(Number),
          error: "the receiver answered 500",
          retryAt: expect.any(String)
        }
      })
      const dead = yield* lineWhere(
        "a dead delivery",
        (l) => l.fields.webhookId === failingHook && l.fields.attempt === 2
      )
      expect(dead).toMatchObject({
        level: "ERROR",
        message: "Webhook delivery dead: no more attempts",
        fields: { status: 500, deliveryId: retried.fields.deliveryId }
      })

      // A 410: dead at once, and the webhook disabled.
      const goneDead = yield* lineWhere(
        "the 410's delivery",
        (l) => l.fields.webhookId === goneHook && l.fields.attempt === 1
      )
      expect(goneDead).toMatchObject({ level: "ERROR", fields: { status: 410 } })
      const disabled = yield* lineWhere(
        "the webhook disabled",
        (l) => l.message === "Webhook disabled" && l.fields.webhookId === goneHook
      )
      expect(disabled).toMatchObject({ level: "ERROR", fields: { reason: "gone_410" } })
    }))

  it.effect("an upstream refusal: at warn, with the Graph code, subcode and fbtrace_id, under the request id", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const refused = yield* hub.request("POST", "/api/messages", {
        token: tenant.instanceToken,
        json: { to: "999132001111", type: "text", text: { body: "hi" } },
        headers: { "x-request-id": "refusal-1" }
      })
      expect(refused.status).toBe(404)
      const logged = yield* lineWhere("the refusal", (l) => l.fields.requestId === "refusal-1" && l.level === "WARN")
      expect(logged).toMatchObject({
        message: "The upstream refused a request",
        fields: {
          status: 404,
          error: "upstream_error",
          code: 132001,
          error_subcode: 2494073,
          fbtrace_id: expect.stringMatching(/\w/)
        }
      })
      // And the access line, under the same id.
      yield* lineWhere(
        "the access line",
        (l) => l.fields.requestId === "refusal-1" && l.message === "request" && l.fields.status === 404
      )
    }))
})

describe("the pretty format", () => {
  const record = (message: unknown, fields: Record<string, unknown>, cause: Cause.Cause<unknown> = Cause.empty) => ({
    date: new Date(2026, 10, 23, 9, 5, 7, 42),
    logLevel: LogLevel.Info,
    message,
    annotations: HashMap.fromIterable(Object.entries(fields)),
    cause
  })

  it("prints a request on one line: method, path, status, duration, request id", () => {
    const line = prettyLine(
      record("request", { status: 200, durationMs: 3.1, path: "/api/messages", requestId: "ab12-3", method: "POST" }),
      false
    )
    expect(line).toBe("[09:05:07.042] INFO  POST /api/messages 200 3.1ms requestId=ab12-3")
  })

  it("prints any other record on one line, the request id first and the other fields by name", () => {
    const line = prettyLine(
      record(["Webhook delivery failed", { extra: 1 }], {
        webhookId: "wh_1",
        attempt: 2,
        requestId: "r-1",
        error: "the receiver answered 500"
      }),
      false
    )
    expect(line).toBe(
      "[09:05:07.042] INFO  Webhook delivery failed {\"extra\":1} requestId=r-1 attempt=2 error=\"the receiver answered 500\" webhookId=wh_1"
    )
    const failure = prettyLine(record("Unhandled failure", {}, Cause.die(new Error("boom\nsecond line"))), false)
    expect(failure.split("\n")).toHaveLength(1)
    expect(failure).toMatch(/^\[09:05:07\.042\] INFO  Unhandled failure cause=".*boom/)
  })

  it("escapes control characters in every part of the line (a forged line or a terminal escape stays one line of text)", () => {
    const forged = "x\n[09:05:07.042] INFO  POST /api/admin 200 1ms\u001b[2J\u2028\u0085\u007f"
    const access = prettyLine(
      record("request", { status: 200, durationMs: 1, path: `/api/${forged}`, requestId: forged, method: "GET" }),
      false
    )
    const other = prettyLine(record(`Upstream said ${forged}`, { error: forged, user: "a\u0007b" }), false)
    for (const line of [access, other]) {
      expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/)
      expect(line).toContain("\\u001b[2J")
    }
    expect(other).toContain("Upstream said x\\u000a[09:05:07.042]")
    expect(other).toContain("user=a\\u0007b")
  })
})

describe("the json format", () => {
  it.effect("escapes what JSON leaves raw (DEL, C1, U+2028/9), and stays JSON that reads back the same value", () =>
    Effect.gen(function*() {
      const written: Array<string> = []
      const value = "a\u001b[31m\u007f\u0085\u2028\u2029\nz"
      yield* Effect.logInfo(value).pipe(
        Effect.annotateLogs({ error: value }),
        Effect.provide(Logger.replace(Logger.defaultLogger, Logger.map(jsonLine, (line) => written.push(line))))
      )
      expect(written).toHaveLength(1)
      const line = written[0] ?? ""
      expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/)
      const parsed: unknown = JSON.parse(line)
      expect(parsed).toMatchObject({ message: value, annotations: { error: value } })
    }))
})

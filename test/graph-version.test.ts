/**
 * The Graph API version: v25.0 by default; a configured version that ends within 90 days (or has
 * ended) is warned about at start, and an answer in another version than asked is said once.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { hubSettings } from "../src/Config.js"
import { graphVersionOf, versionWarning } from "../src/Upstream/GraphVersion.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

describe("Graph API versions", () => {
  it.effect("the default is v25.0", () =>
    Effect.gen(function*() {
      const settings = yield* hubSettings
      expect(settings.graphUrl).toBe("https://graph.facebook.com/v25.0")
    }))

  it("warns within 90 days of a version's end, and after it; not before, nor for a version without an end", () => {
    const at = (day: string) => new Date(`${day}T12:00:00Z`)
    expect(versionWarning("https://graph.facebook.com/v23.0", at("2027-07-01"))).toBeUndefined()
    expect(versionWarning("https://graph.facebook.com/v23.0", at("2027-07-11"))).toBe(
      "HUB_GRAPH_URL names Graph API v23.0, which Meta serves until 2027-10-08 (89 days): move to v25.0 or later"
    )
    expect(versionWarning("https://graph.facebook.com/v20.0/", at("2026-11-25"))).toBe(
      "HUB_GRAPH_URL names Graph API v20.0, which Meta stopped serving after 2026-09-24: calls will be refused; move to v25.0 or later"
    )
    expect(versionWarning("https://graph.facebook.com/v26.0", at("2026-11-25"))).toBeUndefined()
    expect(versionWarning("http://127.0.0.1:9/graph", at("2026-11-25"))).toBeUndefined()
    expect(graphVersionOf("https://graph.facebook.com/v25.0")).toBe("v25.0")
  })
})

const logged: Array<{ readonly level: string; readonly message: string }> = []
const capture = Logger.make(({ logLevel, message }) => {
  logged.push({ level: logLevel.label, message: [message].flat().map(String).join(" ") })
})

layer(
  testHubOnFakeGraph(
    {},
    Layer.merge(Logger.replace(Logger.defaultLogger, capture), Logger.minimumLogLevel(LogLevel.Info))
  ),
  { excludeTestServices: true }
)(
  "the version the Graph answers with",
  (it) => {
    it.effect("another version than asked is logged once, however many answers carry it", () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        yield* fake.respond({ method: "GET", path: /message_qrdls/ }, {
          body: { data: [] },
          headers: { "facebook-api-version": "v24.0" }
        }, 3)
        for (let i = 0; i < 3; i++) {
          expect((yield* hub.request("GET", "/qr-codes", { token: tenant.instanceToken })).status).toBe(200)
        }
        expect(logged.filter((line) => line.message.startsWith("The Graph API answers with version"))).toEqual([
          { level: "WARN", message: "The Graph API answers with version v24.0, not the v23.0 HUB_GRAPH_URL asks for" }
        ])
      }))
  }
)

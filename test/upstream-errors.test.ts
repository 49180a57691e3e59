/**
 * Meta's 2025-26 error codes reach the caller with a stable `error` and `details.upstream`: a throughput
 * upgrade in progress (131057) is a 503 with Retry-After, call and group limits are 429, the rest keep
 * the Graph's 4xx. The table, and two of them through the real HTTP server and the sandbox.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { toHubError } from "../src/Upstream/toHubError.js"
import { graphError } from "../src/Upstream/UpstreamError.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"

const refused = (code: number, status = 400) => toHubError(graphError({ status, code, message: `(#${code}) refused` }))

describe("the 2026 Graph codes", () => {
  it("each is answered with its stable error, its status and the upstream's code", () => {
    const cases: ReadonlyArray<readonly [number, number, string]> = [
      [131057, 503, "upstream_maintenance"],
      [138002, 429, "upstream_rate_limited"],
      [138005, 429, "upstream_rate_limited"],
      [131208, 429, "upstream_rate_limited"],
      [131062, 400, "recipient_needs_phone_number"],
      [131063, 400, "marketing_disabled_on_cloud_api"],
      [131064, 400, "messaging_limit_reached"],
      [137000, 400, "identity_key_mismatch"],
      [138000, 400, "calling_refused"],
      [138018, 400, "calling_refused"],
      [139100, 400, "block_users_failed"],
      [139103, 400, "block_users_failed"],
      [131200, 400, "groups_refused"],
      [131215, 400, "groups_refused"],
      [147001, 400, "username_refused"],
      [147005, 400, "username_refused"],
      [131999, 400, "upstream_error"]
    ]
    for (const [code, status, error] of cases) {
      const answer = refused(code)
      expect({ code, status: answer.statusCode, error: answer.error }).toEqual({ code, status, error })
      expect(answer.details).toMatchObject({ upstream: { code } })
    }
    const maintenance = refused(131057)
    expect(maintenance._tag === "UpstreamFailure" ? maintenance.retryAfterSeconds : undefined).toBe(60)
  })
})

layer(testHub(), { excludeTestServices: true })("the 2026 Graph codes through the sandbox", (it) => {
  it.effect("131057 is a 503 with Retry-After; 131062 a 400 naming it; both with details.upstream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const upgrade = yield* hub.request("POST", "/api/messages", {
        token: tenant.instanceToken,
        json: { to: "9991310571234", text: { body: "x" } }
      })
      expect(upgrade.status).toBe(503)
      expect(upgrade.headers.get("retry-after")).toBe("60")
      expect(upgrade.body).toMatchObject({
        statusCode: 503,
        error: "upstream_maintenance",
        details: { upstream: { code: 131057 } }
      })
      const bsuid = yield* hub.request("POST", "/api/messages", {
        token: tenant.instanceToken,
        json: { to: "9991310621234", text: { body: "x" } }
      })
      expect(bsuid.status).toBe(400)
      expect(bsuid.body).toMatchObject({
        error: "recipient_needs_phone_number",
        details: { upstream: { code: 131062 } }
      })
    }))
})

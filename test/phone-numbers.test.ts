import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const settingsWithSip = {
  calling: {
    status: "ENABLED",
    call_icon_visibility: "DEFAULT",
    callback_permission_status: "ENABLED",
    sip: {
      status: "ENABLED",
      servers: [{ hostname: "sip.example.com", port: 5061, sip_user_password: "s3cr3t", password: "s3cr3t-too" }]
    }
  },
  payload_encryption: { status: "enabled", client_encryption_key_fingerprint: "ab:cd", cloud_encryption_key: "KEY" },
  storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" }
}

layer(testHubOnFakeGraph())("phone numbers on the Graph API", (it) => {
  it.effect("GET /api/phone-numbers/settings strips SIP passwords unless include_sip_credentials=true", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-settings" })
      const path = `/${tenant.phoneNumberId}/settings`
      yield* fake.respond({ method: "GET", path }, { body: settingsWithSip }, 3)

      const client = yield* hub.client(tenant.instanceToken)
      const plain = yield* client.phoneNumbers.settings({ urlParams: {} })
      expect(JSON.stringify(plain)).not.toContain("s3cr3t")
      expect(plain).toEqual({
        ...settingsWithSip,
        calling: {
          ...settingsWithSip.calling,
          sip: { status: "ENABLED", servers: [{ hostname: "sip.example.com", port: 5061 }] }
        }
      })
      let sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0${path}`)
      expect(sent.query).toEqual({ include_sip_credentials: "false" })
      expect(sent.headers.authorization).toBe("Bearer EAAG-settings")

      const explicitFalse = yield* client.phoneNumbers.settings({ urlParams: { include_sip_credentials: "false" } })
      expect(JSON.stringify(explicitFalse)).not.toContain("s3cr3t")

      const withSecrets = yield* client.phoneNumbers.settings({ urlParams: { include_sip_credentials: "true" } })
      expect(withSecrets).toEqual(settingsWithSip)
      sent = yield* fake.lastRequest
      expect(sent.query).toEqual({ include_sip_credentials: "true" })
    }))

  it.effect("include_sip_credentials is parsed strictly", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      for (const value of ["yes", "1", "TRUE", ""]) {
        const result = yield* hub.request("GET", `/api/phone-numbers/settings?include_sip_credentials=${value}`, {
          token: tenant.instanceToken
        })
        expect(result.status).toBe(400)
        expect(result.body.details).toEqual([{ field: "include_sip_credentials", message: "must be true or false" }])
      }
    }))

  it.effect("POST settings on both paths sends exactly the one section and answers {success}", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-update" })
      const updates = [
        {
          calling: {
            status: "enabled",
            call_icon_visibility: "DEFAULT",
            sip: { status: "ENABLED", servers: [{ hostname: "sip.example.com", port: 5061 }] },
            srtp_key_exchange_protocol: "DTLS",
            call_hours: { status: "ENABLED", timezone_id: "Europe/Berlin" }
          }
        },
        {
          payload_encryption: {
            status: "enabled",
            client_encryption_key: "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"
          }
        },
        { payload_encryption: { status: "disabled" } },
        { storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" } },
        { user_identity_change: { enable_identity_key_check: true } }
      ]
      const client = yield* hub.client(tenant.instanceToken)
      for (const [i, update] of updates.entries()) {
        // Both paths: /phone-numbers/settings and /api/phone-numbers/settings.
        const endpoint = i % 2 === 0 ? client.phoneNumbers.updateSettings : client.phoneNumbers.updateSettingsApi
        const result = yield* endpoint({ payload: update })
        expect({ i, result }).toEqual({ i, result: { success: true } })
        const sent = yield* fake.lastRequest
        expect(sent).toMatchObject({ method: "POST", path: `/v23.0/${tenant.phoneNumberId}/settings`, json: update })
        expect(sent.headers.authorization).toBe("Bearer EAAG-update")
      }
    }))

  it.effect("none or several sections, or bad values, are 400 naming the rule and the fields; nothing goes upstream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const rule = (found: string) =>
        `exactly one feature section per request: give one of calling, payload_encryption, storage_configuration, user_identity_change (found ${found})`
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<{ field: string; message: string }>]> = [
        [{}, [{ field: "body", message: rule("none") }]],
        // A section the hub does not model is forwarded as one (see sends-2026.test.ts), so it counts.
        [{ calling: { status: "enabled" }, unknown_section: {} }, [{
          field: "body",
          message: rule("calling, unknown_section")
        }]],
        [{ calling: { status: "enabled" }, payload_encryption: { status: "disabled" } }, [{
          field: "body",
          message: rule("calling, payload_encryption")
        }]],
        [{ payload_encryption: { status: "enabled" } }, [{
          field: "payload_encryption.client_encryption_key",
          message: "is required when status is enabled"
        }]],
        [{ payload_encryption: { status: "on" } }, [{
          field: "payload_encryption.status",
          message: "must be one of enabled, disabled (any case)"
        }]],
        [{ calling: { status: "maybe", sip: { status: 1 } } }, [
          { field: "calling.status", message: "must be one of enabled, disabled (any case)" },
          { field: "calling.sip.status", message: "Expected string, actual 1" }
        ]],
        [{ storage_configuration: { status: "DEFAULT", data_localization_region: "Germany" } }, [
          {
            field: "storage_configuration.data_localization_region",
            message: "must be a two-letter country code such as DE"
          }
        ]],
        [{ user_identity_change: "yes" }, [{ field: "user_identity_change", message: "must be an object" }]]
      ]
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      for (const [update, details] of cases) {
        const result = yield* hub.request("POST", "/api/phone-numbers/settings", {
          token: tenant.instanceToken,
          json: update
        })
        expect({ update, status: result.status, details: result.body.details }).toEqual({
          update,
          status: 400,
          details
        })
      }
      expect(yield* fake.requests).toEqual([])
    }))

  it.effect("GET /phone-numbers/list passes the envelope through, for instance tokens and organization tokens naming the instance", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-list" })
      const listed = yield* (yield* hub.client(tenant.instanceToken)).phoneNumbers.list({ urlParams: {} })
      expect(listed).toEqual({
        data: [{
          id: "106540352242922",
          display_phone_number: "+1 555-078-3881",
          verified_name: "Lucky Shrub",
          quality_rating: "GREEN",
          status: "CONNECTED"
        }],
        paging: { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } }
      })
      const sent = yield* fake.lastRequest
      expect(sent).toMatchObject({ method: "GET", path: `/v23.0/${tenant.wabaId}/phone_numbers`, query: {} })
      expect(sent.headers.authorization).toBe("Bearer EAAG-list")

      const org = yield* hub.client(tenant.orgToken)
      yield* org.phoneNumbers.list({ urlParams: { phone_number_id: tenant.phoneNumberId, limit: 5, after: "QVFI" } })
      expect((yield* fake.lastRequest).query).toEqual({ limit: "5", after: "QVFI" })
      yield* org.phoneNumbers.list({ urlParams: { instance_id: tenant.instanceId } })

      const unnamed = yield* refusedWith(org.phoneNumbers.list({ urlParams: {} }), "BadRequest")
      expect(unnamed.error).toBe("instance_required")
      const other = yield* seedTenant()
      yield* refusedWith(org.phoneNumbers.list({ urlParams: { instance_id: other.instanceId } }), "NotFound")
      yield* refusedWith(
        (yield* hub.client(tenant.instanceToken)).phoneNumbers.list({ urlParams: { instance_id: other.instanceId } }),
        "Forbidden"
      )
    }))

  it.effect("settings are instance-only: organization tokens get 403", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      // phone_number_id is no parameter of the settings read (the typed client cannot name it): raw.
      const read = yield* hub.request("GET", `/api/phone-numbers/settings?phone_number_id=${tenant.phoneNumberId}`, {
        token: tenant.orgToken
      })
      expect(read.status).toBe(403)
      expect(read.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      const org = yield* hub.client(tenant.orgToken)
      for (const update of [org.phoneNumbers.updateSettings, org.phoneNumbers.updateSettingsApi]) {
        const refused = yield* refusedWith(update({ payload: { calling: { status: "enabled" } } }), "Forbidden")
        expect(refused.error).toBe("forbidden_token_kind")
      }
      yield* refusedWith((yield* hub.client(tenant.sessionToken)).phoneNumbers.list({ urlParams: {} }), "Forbidden")
    }))

  it.effect("an upstream 5xx on the settings read is a 502 after the client's retries", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      yield* fake.respond({ path: `/${tenant.phoneNumberId}/settings` }, {
        status: 500,
        body: { error: { message: "Service temporarily unavailable", code: 2 } }
      }, 5)
      const result = yield* refusedWith(
        (yield* hub.client(tenant.instanceToken)).phoneNumbers.settings({ urlParams: {} }),
        "UpstreamFailure"
      )
      expect(result.status).toBe(502)
      expect(result.message).toBe("Service temporarily unavailable")
      expect(result.error).toBe("upstream_error")
    }))
})

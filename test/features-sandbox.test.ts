/** The issue-4 endpoints against the in-process sandbox (the default upstream), end to end over HTTP. */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Redacted } from "effect"
import { sandboxGroupsOf } from "../src/Sandbox/Graph/Account.js"
import { Upstream } from "../src/Upstream/Upstream.js"
import { fileBytes, form, JPEG_HEAD, sha256 } from "./support/Files.js"
import { checkedFetch } from "./support/OpenApiCheck.js"
import { refusedWith } from "./support/Refusal.js"
import { ShiftedClock, shiftedClockLayer } from "./support/ShiftedClock.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { sendVia } from "./support/UpstreamSend.js"

const APPROVAL_DELAY = Duration.hours(1)

const hub = Layer.provideMerge(
  testHub({ sandboxApprovalDelay: APPROVAL_DELAY, sandboxStatusDelay: Duration.hours(1) }),
  shiftedClockLayer
)

layer(hub)("issue 4 endpoints on the sandbox", (it) => {
  it.effect("media: upload on both paths, info with an integer file_size, download of the same bytes", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const bytes = fileBytes(JPEG_HEAD, 200 * 1024)
      const client = yield* http.client(tenant.instanceToken)
      // Uploads (multipart) and the download (bytes) are the wire's matter: raw. The info goes through the typed client.
      for (const path of ["/media", "/api/media"]) {
        const uploaded = yield* http.request("POST", path, {
          token: tenant.instanceToken,
          body: form({
            messaging_product: "whatsapp",
            type: "image/jpeg",
            file: { bytes, filename: "photo.jpg", type: "image/jpeg" }
          })
        })
        expect(uploaded.status).toBe(200)
        const id = String(uploaded.body.id)
        const info = yield* client.media.info({ path: { mediaId: id } })
        expect(info).toEqual({
          url: expect.stringMatching(/^http/),
          mime_type: "image/jpeg",
          sha256: sha256(bytes),
          file_size: bytes.byteLength,
          id
        })
        const download = yield* Effect.promise(() =>
          checkedFetch(`${http.baseUrl}/media/${id}/download`, {
            headers: { authorization: `Bearer ${tenant.instanceToken}` }
          })
        )
        expect(download.status).toBe(200)
        expect(download.headers.get("content-type")).toBe("image/jpeg")
        expect(sha256(new Uint8Array(yield* Effect.promise(() => download.arrayBuffer())))).toBe(sha256(bytes))
      }
      // Another tenant's media is not found, even by id.
      const other = yield* seedTenant()
      const uploaded = yield* http.request("POST", "/media", {
        token: tenant.instanceToken,
        body: form({ messaging_product: "whatsapp", type: "image/jpeg", file: { bytes, filename: "photo.jpg" } })
      })
      yield* refusedWith(
        (yield* http.client(other.instanceToken)).media.info({ path: { mediaId: String(uploaded.body.id) } }),
        "NotFound"
      )
      const tooBig = yield* http.request("POST", "/media", {
        token: tenant.instanceToken,
        body: form({
          messaging_product: "whatsapp",
          type: "image/jpeg",
          file: { bytes: fileBytes(JPEG_HEAD, 5 * 1024 * 1024 + 1), filename: "big.jpg" }
        })
      })
      expect(tooBig.status).toBe(413)
    }))

  it.effect("templates: PENDING at creation, APPROVED after the delay; template sends are refused until then", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const clock = yield* ShiftedClock
      const upstream = yield* Upstream
      const tenant = yield* seedTenant()
      const template = {
        name: "order_ready",
        language: "en_US",
        category: "UTILITY",
        components: [{ type: "BODY", text: "Order {{1}} is ready", example: { body_text: [["42"]] } }]
      } as const
      const client = yield* http.client(tenant.instanceToken)
      const created = yield* client.templates.create({ payload: template })
      expect(created).toEqual({ id: expect.stringMatching(/^\d+$/), status: "PENDING", category: "UTILITY" })
      const id = created.id

      const read = yield* client.templates.get({ path: { templateId: id } })
      expect(read).toMatchObject({ id, name: "order_ready", language: "en_US", status: "PENDING", category: "UTILITY" })
      const pending = yield* client.templates.list({ urlParams: { status: "PENDING" } })
      expect(pending.data.map((t) => t.id)).toEqual([id])

      const target = {
        phoneNumberId: tenant.phoneNumberId,
        wabaId: tenant.wabaId,
        accessToken: Redacted.make("sandbox")
      }
      const send = sendVia(upstream, target, {
        messaging_product: "whatsapp",
        to: "5511987654321",
        type: "template",
        template: {
          name: "order_ready",
          language: { code: "en_US" },
          components: [{ type: "body", parameters: [{ type: "text", text: "42" }] }]
        }
      })
      const refused = yield* Effect.either(send)
      expect(Either.isLeft(refused) && refused.left.code).toBe(132001)

      yield* clock.advance(Duration.toMillis(APPROVAL_DELAY))
      const approved = yield* client.templates.get({ path: { templateId: id } })
      expect(approved.status).toBe("APPROVED")
      const listed = yield* client.templates.list({ urlParams: { status: "APPROVED", name: "order_ready" } })
      expect(listed.data.map((t) => [t.id, t.status])).toEqual([[id, "APPROVED"]])
      const sent = yield* send
      expect(sent.messages[0]?.id).toMatch(/^wamid\./)

      const duplicate = yield* refusedWith(client.templates.create({ payload: template }), "UpstreamFailure")
      expect(duplicate.status).toBe(400)
      expect(duplicate).toMatchObject({
        error: "upstream_error",
        details: { upstream: { code: 100, error_subcode: 2388024 } }
      })
      const other = yield* seedTenant()
      yield* refusedWith(
        (yield* http.client(other.instanceToken)).templates.get({ path: { templateId: id } }),
        "NotFound"
      )
    }))

  it.effect("settings: passwords only on request; one section updates, the read shows it", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* http.client(tenant.instanceToken)
      const plain = yield* client.phoneNumbers.settings({ urlParams: {} })
      expect(JSON.stringify(plain)).not.toContain("password")
      expect(plain).toMatchObject({
        calling: { status: "ENABLED" },
        payload_encryption: { status: "disabled" },
        storage_configuration: { status: "DEFAULT" }
      })
      const secret = yield* client.phoneNumbers.settings({ urlParams: { include_sip_credentials: "true" } })
      expect(JSON.stringify(secret)).toContain("sip_user_password")

      const updated = yield* client.phoneNumbers.updateSettings({
        payload: {
          payload_encryption: {
            status: "enabled",
            client_encryption_key: "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA"
          }
        }
      })
      expect(updated).toEqual({ success: true })
      const after = yield* client.phoneNumbers.settings({ urlParams: {} })
      expect(after.payload_encryption).toMatchObject({
        status: "enabled",
        client_encryption_key_fingerprint: expect.any(String),
        cloud_encryption_key: expect.any(String)
      })
      const storage = yield* client.phoneNumbers.updateSettingsApi({
        payload: { storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" } }
      })
      expect(storage).toEqual({ success: true })
      // Two sections: the typed client would refuse to encode them, so they go raw.
      const two = yield* http.request("POST", "/api/phone-numbers/settings", {
        token: tenant.instanceToken,
        json: { calling: { status: "disabled" }, storage_configuration: { status: "DEFAULT" } }
      })
      expect(two.status).toBe(400)
      const final = yield* client.phoneNumbers.settings({ urlParams: {} })
      expect(final.storage_configuration).toEqual({
        status: "IN_COUNTRY_STORAGE_ENABLED",
        data_localization_region: "DE"
      })
      expect(final.calling).toMatchObject({ status: "ENABLED" })
    }))

  it.effect("phone number list, calls, analytics and compliance", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* http.client(tenant.instanceToken)
      const org = yield* http.client(tenant.orgToken)
      const list = yield* org.phoneNumbers.list({ urlParams: { phone_number_id: tenant.phoneNumberId } })
      expect(list.data).toEqual([
        expect.objectContaining({ id: tenant.phoneNumberId, quality_rating: "GREEN", status: "CONNECTED" })
      ])

      // No call is ringing until the upstream's connect webhook says one is; then `to` finds it.
      const early = yield* refusedWith(client.calls.preAccept({ payload: { to: "5511987654321" } }), "Conflict")
      expect(early.error).toBe("no_ringing_call")
      const byId = yield* client.calls.preAccept({
        payload: { to: "5511987654321", call_id: "wacid.ABGGFjFVU2AfAgo6V" }
      })
      expect(byId).toEqual({ success: true })
      const connect = {
        object: "whatsapp_business_account",
        entry: [{
          id: tenant.wabaId,
          changes: [{
            field: "calls",
            value: {
              messaging_product: "whatsapp",
              metadata: { display_phone_number: "15550783881", phone_number_id: tenant.phoneNumberId },
              calls: [{
                id: "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA",
                from: "5511987654321",
                to: "15550783881",
                event: "connect",
                direction: "USER_INITIATED",
                timestamp: String(Math.floor(Date.now() / 1000)),
                session: { sdp_type: "offer", sdp: "v=0" }
              }]
            }
          }]
        }]
      }
      expect((yield* http.request("POST", "/upstream/events", { json: connect })).status).toBe(200)
      const call = yield* client.calls.preAccept({ payload: { to: "5511987654321" } })
      expect(call).toEqual({ success: true })

      const page = yield* client.analytics.activities({ urlParams: { limit: 5 } })
      expect(page.data.length).toBe(5)
      expect(page.paging).toMatchObject({
        cursors: { before: expect.any(String), after: expect.any(String) },
        next: expect.any(String)
      })
      const after = page.paging?.cursors?.after
      expect(after).toEqual(expect.any(String))
      const next = yield* client.analytics.activities({ urlParams: { limit: 5, after } })
      expect(next.data[0]?.id).not.toBe(page.data[0]?.id)
      const typed = yield* org.analytics.activities({
        urlParams: { type: "TEMPLATE_CREATED", instance_id: tenant.instanceId }
      })
      expect(typed.data.length).toBeGreaterThan(0)
      expect(typed.data.every((a) => a.activity_type === "TEMPLATE_CREATED")).toBe(true)
      const since = Math.floor(Date.now() / 1000) - 7 * 24 * 3600
      const recent = yield* client.analytics.activities({ urlParams: { since: String(since) } })
      const recentTimes = recent.data.map((a) => Date.parse(String(a.timestamp)))
      expect(recentTimes.length).toBeGreaterThan(0)
      expect(recentTimes.length).toBeLessThan(next.data.length + page.data.length)
      expect(recentTimes.every((t) => t >= since * 1000)).toBe(true)

      const compliance = yield* client.analytics.compliance({ urlParams: {} })
      expect(compliance.data[0]).toMatchObject({ whatsapp_business_account_id: tenant.wabaId, is_registered: true })
    }))

  it.effect("QR codes, groups and the business profile", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* http.client(tenant.instanceToken)
      const codes = yield* client.qrCodes.list({ urlParams: { fields: "code,prefilled_message,deep_link_url" } })
      const first = codes.data[0]
      expect(first).toEqual({
        code: expect.stringMatching(/^[A-Z0-9]{14}$/),
        prefilled_message: expect.any(String),
        deep_link_url: expect.stringMatching(/^https:\/\/wa\.me\/message\//)
      })
      const messagesOnly = yield* client.qrCodes.list({ urlParams: { fields: "prefilled_message", limit: 1 } })
      expect(messagesOnly.data).toEqual([{ prefilled_message: first?.prefilled_message }])
      const one = yield* client.qrCodes.get({ path: { qrCodeId: String(first?.code) }, urlParams: {} })
      expect(one).toMatchObject({ code: first?.code, prefilled_message: first?.prefilled_message })
      yield* refusedWith(client.qrCodes.get({ path: { qrCodeId: "AAAAAAAAAAAAAA" }, urlParams: {} }), "NotFound")

      // The sandbox number's groups (GET /{phone-number-id}/groups), by their group number and in the Cloud API's form.
      const [cloudGroup = "", otherGroup = ""] = sandboxGroupsOf(tenant.phoneNumberId)
      const numbered = `${/^capi_group:\d+:(\d+)$/.exec(Buffer.from(cloudGroup, "base64url").toString())?.[1]}@g.us`
      const group = yield* client.groups.get({ path: { groupId: numbered } })
      expect(group).toEqual({
        id: numbered,
        subject: expect.any(String),
        description: expect.any(String),
        creation_time: expect.any(Number),
        participants_count: expect.any(Number)
      })
      expect(Number.isInteger(group.creation_time)).toBe(true)
      const opaque = yield* client.groups.get({ path: { groupId: otherGroup } })
      expect(opaque).toMatchObject({
        id: otherGroup,
        subject: expect.any(String),
        participants_count: expect.any(Number)
      })
      // Another sandbox number's group is not this instance's.
      const stranger = yield* seedTenant()
      yield* refusedWith(
        (yield* http.client(stranger.instanceToken)).groups.get({ path: { groupId: otherGroup } }),
        "NotFound"
      )

      const profile = yield* client.businessProfile.get({ urlParams: {} })
      expect(profile).toMatchObject({
        about: expect.any(String),
        vertical: expect.any(String),
        websites: expect.any(Array)
      })
    }))

  it.effect("flows: list, assets, upload, and deprecation of a PUBLISHED flow only, once", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const client = yield* http.client(tenant.instanceToken)
      const flows = (yield* client.flows.list({ urlParams: {} })).data
      const published = flows.find((f) => f.status === "PUBLISHED")
      const draft = flows.find((f) => f.status === "DRAFT")
      expect(published).toMatchObject({
        id: expect.stringMatching(/^\d+$/),
        categories: expect.any(Array),
        validation_errors: []
      })
      if (published === undefined || draft === undefined) {
        return yield* Effect.dieMessage("the sandbox's published and draft flows")
      }

      const assets = yield* client.flows.assets({ path: { flowId: published.id } })
      expect(assets.data).toEqual([
        expect.objectContaining({ name: "flow.json", asset_type: "FLOW_JSON", download_url: expect.any(String) })
      ])

      // An upload (multipart): raw.
      const noVersion = yield* http.request("POST", `/flows/${draft.id}/assets`, {
        token: tenant.instanceToken,
        body: form({
          file: {
            bytes: new TextEncoder().encode("{\"screens\":[]}"),
            filename: "flow.json",
            type: "application/json"
          },
          name: "flow.json",
          asset_type: "FLOW_JSON"
        })
      })
      expect(noVersion.status).toBe(200)
      expect(noVersion.body).toEqual({
        success: true,
        validation_errors: [expect.objectContaining({ error: "MISSING_REQUIRED_PROPERTY" })]
      })

      const refused = yield* refusedWith(client.flows.deprecate({ path: { flowId: draft.id } }), "UpstreamFailure")
      expect(refused.status).toBe(400)
      expect(refused.error).toBe("upstream_error")
      expect(JSON.stringify(refused.details)).toContain("only a PUBLISHED flow can be deprecated")

      const done = yield* client.flows.deprecate({ path: { flowId: published.id } })
      expect(done).toEqual({ success: true })
      const again = yield* refusedWith(client.flows.deprecate({ path: { flowId: published.id } }), "UpstreamFailure")
      expect(again.status).toBe(400)
      const after = (yield* client.flows.list({ urlParams: {} })).data
      expect(after.find((f) => f.id === published.id)?.status).toBe("DEPRECATED")

      const other = yield* seedTenant()
      yield* refusedWith(
        (yield* http.client(other.instanceToken)).flows.assets({ path: { flowId: published.id } }),
        "NotFound"
      )
    }))
})

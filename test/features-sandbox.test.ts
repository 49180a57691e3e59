/** The issue-4 endpoints against the in-process sandbox (the default upstream), end to end over HTTP. */
import { sandboxGroupsOf } from "../src/Sandbox/Graph/Account.js"
import { expect, layer } from "@effect/vitest"
import { Duration, Effect, Either, Layer, Redacted } from "effect"
import { Upstream } from "../src/Upstream/Upstream.js"
import { fileBytes, form, JPEG_HEAD, sha256 } from "./support/Files.js"
import { ShiftedClock, shiftedClockLayer } from "./support/ShiftedClock.js"
import { seedTenant, TestHub, testHub } from "./support/TestHub.js"
import { sendVia } from "./support/UpstreamSend.js"
import { checkedFetch } from "./support/OpenApiCheck.js"

const APPROVAL_DELAY = Duration.hours(1)

const hub = Layer.provideMerge(testHub({ sandboxApprovalDelay: APPROVAL_DELAY, sandboxStatusDelay: Duration.hours(1) }), shiftedClockLayer)

type Rows = ReadonlyArray<Record<string, unknown>>
const rows = (value: unknown): Rows => (Array.isArray(value) ? value : [])

layer(hub)("issue 4 endpoints on the sandbox", (it) => {
  it.effect("media: upload on both paths, info with an integer file_size, download of the same bytes", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const bytes = fileBytes(JPEG_HEAD, 200 * 1024)
      for (const path of ["/media", "/api/media"]) {
        const uploaded = yield* http.request("POST", path, {
          token: tenant.instanceToken,
          body: form({ messaging_product: "whatsapp", type: "image/jpeg", file: { bytes, filename: "photo.jpg", type: "image/jpeg" } })
        })
        expect(uploaded.status).toBe(200)
        const id = String(uploaded.body.id)
        const info = yield* http.request("GET", `/media/${id}`, { token: tenant.instanceToken })
        expect(info.status).toBe(200)
        expect(info.body).toEqual({ url: expect.stringMatching(/^http/), mime_type: "image/jpeg", sha256: sha256(bytes), file_size: bytes.byteLength, id })
        const download = yield* Effect.promise(() =>
          checkedFetch(`${http.baseUrl}/media/${id}/download`, { headers: { authorization: `Bearer ${tenant.instanceToken}` } })
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
      const foreign = yield* http.request("GET", `/media/${uploaded.body.id}`, { token: other.instanceToken })
      expect(foreign.status).toBe(404)
      const tooBig = yield* http.request("POST", "/media", {
        token: tenant.instanceToken,
        body: form({ messaging_product: "whatsapp", type: "image/jpeg", file: { bytes: fileBytes(JPEG_HEAD, 5 * 1024 * 1024 + 1), filename: "big.jpg" } })
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
      }
      const created = yield* http.request("POST", "/templates", { token: tenant.instanceToken, json: template })
      expect(created.status).toBe(200)
      expect(created.body).toEqual({ id: expect.stringMatching(/^\d+$/), status: "PENDING", category: "UTILITY" })
      const id = String(created.body.id)

      const read = yield* http.request("GET", `/templates/${id}`, { token: tenant.instanceToken })
      expect(read.status).toBe(200)
      expect(read.body).toMatchObject({ id, name: "order_ready", language: "en_US", status: "PENDING", category: "UTILITY" })
      const pending = yield* http.request("GET", "/templates?status=PENDING", { token: tenant.instanceToken })
      expect(rows(pending.body.data).map((t) => t.id)).toEqual([id])

      const target = { phoneNumberId: tenant.phoneNumberId, wabaId: tenant.wabaId, accessToken: Redacted.make("sandbox") }
      const send = sendVia(upstream, target, {
        messaging_product: "whatsapp",
        to: "5511987654321",
        type: "template",
        template: { name: "order_ready", language: { code: "en_US" }, components: [{ type: "body", parameters: [{ type: "text", text: "42" }] }] }
      })
      const refused = yield* Effect.either(send)
      expect(Either.isLeft(refused) && refused.left.code).toBe(132001)

      yield* clock.advance(Duration.toMillis(APPROVAL_DELAY))
      const approved = yield* http.request("GET", `/templates/${id}`, { token: tenant.instanceToken })
      expect(approved.body.status).toBe("APPROVED")
      const listed = yield* http.request("GET", "/templates?status=APPROVED&name=order_ready", { token: tenant.instanceToken })
      expect(rows(listed.body.data).map((t) => [t.id, t.status])).toEqual([[id, "APPROVED"]])
      const sent = yield* send
      expect(sent.messages[0]?.id).toMatch(/^wamid\./)

      const duplicate = yield* http.request("POST", "/templates", { token: tenant.instanceToken, json: template })
      expect(duplicate.status).toBe(400)
      expect(duplicate.body).toMatchObject({ error: "upstream_error", details: { upstream: { code: 100, error_subcode: 2388024 } } })
      const other = yield* seedTenant()
      expect((yield* http.request("GET", `/templates/${id}`, { token: other.instanceToken })).status).toBe(404)
    }))

  it.effect("settings: passwords only on request; one section updates, the read shows it", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const plain = yield* http.request("GET", "/api/phone-numbers/settings", { token: tenant.instanceToken })
      expect(plain.status).toBe(200)
      expect(plain.text).not.toContain("password")
      expect(plain.body).toMatchObject({ calling: { status: "ENABLED" }, payload_encryption: { status: "disabled" }, storage_configuration: { status: "DEFAULT" } })
      const secret = yield* http.request("GET", "/api/phone-numbers/settings?include_sip_credentials=true", { token: tenant.instanceToken })
      expect(secret.text).toContain("sip_user_password")

      const updated = yield* http.request("POST", "/phone-numbers/settings", {
        token: tenant.instanceToken,
        json: { payload_encryption: { status: "enabled", client_encryption_key: "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" } }
      })
      expect(updated.body).toEqual({ success: true })
      const after = yield* http.request("GET", "/api/phone-numbers/settings", { token: tenant.instanceToken })
      expect(after.body.payload_encryption).toMatchObject({ status: "enabled", client_encryption_key_fingerprint: expect.any(String), cloud_encryption_key: expect.any(String) })
      const storage = yield* http.request("POST", "/api/phone-numbers/settings", {
        token: tenant.instanceToken,
        json: { storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" } }
      })
      expect(storage.body).toEqual({ success: true })
      const two = yield* http.request("POST", "/api/phone-numbers/settings", {
        token: tenant.instanceToken,
        json: { calling: { status: "disabled" }, storage_configuration: { status: "DEFAULT" } }
      })
      expect(two.status).toBe(400)
      const final = yield* http.request("GET", "/api/phone-numbers/settings", { token: tenant.instanceToken })
      expect(final.body.storage_configuration).toEqual({ status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" })
      expect(final.body.calling).toMatchObject({ status: "ENABLED" })
    }))

  it.effect("phone number list, calls, analytics and compliance", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const list = yield* http.request("GET", `/phone-numbers/list?phone_number_id=${tenant.phoneNumberId}`, { token: tenant.orgToken })
      expect(list.status).toBe(200)
      expect(rows(list.body.data)).toEqual([expect.objectContaining({ id: tenant.phoneNumberId, quality_rating: "GREEN", status: "CONNECTED" })])

      // No call is ringing until the upstream's connect webhook says one is; then `to` finds it.
      const early = yield* http.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: { to: "5511987654321" } })
      expect(early.status).toBe(409)
      expect(early.body).toMatchObject({ statusCode: 409, error: "no_ringing_call" })
      const byId = yield* http.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: { to: "5511987654321", call_id: "wacid.ABGGFjFVU2AfAgo6V" } })
      expect(byId.status).toBe(200)
      expect(byId.body).toEqual({ success: true })
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
      const call = yield* http.request("POST", "/api/calls/pre-accept", { token: tenant.instanceToken, json: { to: "5511987654321" } })
      expect(call.status).toBe(200)
      expect(call.body).toEqual({ success: true })

      const page = yield* http.request("GET", "/api/analytics/activities?limit=5", { token: tenant.instanceToken })
      expect(page.status).toBe(200)
      expect(rows(page.body.data).length).toBe(5)
      expect(page.body.paging).toMatchObject({ cursors: { before: expect.any(String), after: expect.any(String) }, next: expect.any(String) })
      const after = (page.body.paging as { cursors: { after: string } }).cursors.after
      const next = yield* http.request("GET", `/api/analytics/activities?limit=5&after=${encodeURIComponent(after)}`, { token: tenant.instanceToken })
      expect(rows(next.body.data)[0]?.id).not.toBe(rows(page.body.data)[0]?.id)
      const typed = yield* http.request("GET", `/api/analytics/activities?type=TEMPLATE_CREATED&instance_id=${tenant.instanceId}`, { token: tenant.orgToken })
      expect(rows(typed.body.data).length).toBeGreaterThan(0)
      expect(rows(typed.body.data).every((a) => a.activity_type === "TEMPLATE_CREATED")).toBe(true)
      const since = Math.floor(Date.now() / 1000) - 7 * 24 * 3600
      const recent = yield* http.request("GET", `/api/analytics/activities?since=${since}`, { token: tenant.instanceToken })
      const recentTimes = rows(recent.body.data).map((a) => Date.parse(String(a.timestamp)))
      expect(recentTimes.length).toBeGreaterThan(0)
      expect(recentTimes.length).toBeLessThan(rows(next.body.data).length + rows(page.body.data).length)
      expect(recentTimes.every((t) => t >= since * 1000)).toBe(true)

      const compliance = yield* http.request("GET", "/api/analytics/compliance", { token: tenant.instanceToken })
      expect(compliance.status).toBe(200)
      expect(rows(compliance.body.data)[0]).toMatchObject({ whatsapp_business_account_id: tenant.wabaId, is_registered: true })
    }))

  it.effect("QR codes, groups and the business profile", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const codes = yield* http.request("GET", "/qr-codes?fields=code,prefilled_message,deep_link_url", { token: tenant.instanceToken })
      expect(codes.status).toBe(200)
      const first = rows(codes.body.data)[0]
      expect(first).toEqual({ code: expect.stringMatching(/^[A-Z0-9]{14}$/), prefilled_message: expect.any(String), deep_link_url: expect.stringMatching(/^https:\/\/wa\.me\/message\//) })
      const messagesOnly = yield* http.request("GET", "/qr-codes?fields=prefilled_message&limit=1", { token: tenant.instanceToken })
      expect(messagesOnly.status).toBe(200)
      expect(rows(messagesOnly.body.data)).toEqual([{ prefilled_message: first?.prefilled_message }])
      const one = yield* http.request("GET", `/qr-codes/${first?.code}`, { token: tenant.instanceToken })
      expect(one.status).toBe(200)
      expect(one.body).toMatchObject({ code: first?.code, prefilled_message: first?.prefilled_message })
      expect((yield* http.request("GET", "/qr-codes/AAAAAAAAAAAAAA", { token: tenant.instanceToken })).status).toBe(404)

      // The sandbox number's groups (GET /{phone-number-id}/groups), by their group number and in the Cloud API's form.
      const [cloudGroup = "", otherGroup = ""] = sandboxGroupsOf(tenant.phoneNumberId)
      const numbered = `${/^capi_group:\d+:(\d+)$/.exec(Buffer.from(cloudGroup, "base64url").toString())?.[1]}@g.us`
      const group = yield* http.request("GET", `/groups/${numbered}`, { token: tenant.instanceToken })
      expect(group.status).toBe(200)
      expect(group.body).toEqual({
        id: numbered,
        subject: expect.any(String),
        description: expect.any(String),
        creation_time: expect.any(Number),
        participants_count: expect.any(Number)
      })
      expect(Number.isInteger(group.body.creation_time)).toBe(true)
      const opaque = yield* http.request("GET", `/groups/${otherGroup}`, { token: tenant.instanceToken })
      expect(opaque.status).toBe(200)
      expect(opaque.body).toMatchObject({ id: otherGroup, subject: expect.any(String), participants_count: expect.any(Number) })
      // Another sandbox number's group is not this instance's.
      const stranger = yield* seedTenant()
      expect((yield* http.request("GET", `/groups/${otherGroup}`, { token: stranger.instanceToken })).status).toBe(404)

      const profile = yield* http.request("GET", "/api/business-profile", { token: tenant.instanceToken })
      expect(profile.status).toBe(200)
      expect(profile.body).toMatchObject({ about: expect.any(String), vertical: expect.any(String), websites: expect.any(Array) })
    }))

  it.effect("flows: list, assets, upload, and deprecation of a PUBLISHED flow only, once", () =>
    Effect.gen(function*() {
      const http = yield* TestHub
      const tenant = yield* seedTenant()
      const list = yield* http.request("GET", "/flows", { token: tenant.instanceToken })
      expect(list.status).toBe(200)
      const flows = rows(list.body.data)
      const published = flows.find((f) => f.status === "PUBLISHED")
      const draft = flows.find((f) => f.status === "DRAFT")
      expect(published).toMatchObject({ id: expect.stringMatching(/^\d+$/), categories: expect.any(Array), validation_errors: [] })
      expect(draft).toBeDefined()

      const assets = yield* http.request("GET", `/flows/${published?.id}/assets`, { token: tenant.instanceToken })
      expect(rows(assets.body.data)).toEqual([expect.objectContaining({ name: "flow.json", asset_type: "FLOW_JSON", download_url: expect.any(String) })])

      const noVersion = yield* http.request("POST", `/flows/${draft?.id}/assets`, {
        token: tenant.instanceToken,
        body: form({ file: { bytes: new TextEncoder().encode("{\"screens\":[]}"), filename: "flow.json", type: "application/json" }, name: "flow.json", asset_type: "FLOW_JSON" })
      })
      expect(noVersion.status).toBe(200)
      expect(noVersion.body).toEqual({ success: true, validation_errors: [expect.objectContaining({ error: "MISSING_REQUIRED_PROPERTY" })] })

      const refused = yield* http.request("POST", `/flows/${draft?.id}/deprecate`, { token: tenant.instanceToken })
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({ statusCode: 400, error: "upstream_error" })
      expect(JSON.stringify(refused.body.details)).toContain("only a PUBLISHED flow can be deprecated")

      const done = yield* http.request("POST", `/flows/${published?.id}/deprecate`, { token: tenant.instanceToken })
      expect(done.body).toEqual({ success: true })
      const again = yield* http.request("POST", `/flows/${published?.id}/deprecate`, { token: tenant.instanceToken })
      expect(again.status).toBe(400)
      const after = yield* http.request("GET", "/flows", { token: tenant.instanceToken })
      expect(rows(after.body.data).find((f) => f.id === published?.id)?.status).toBe("DEPRECATED")

      const other = yield* seedTenant()
      expect((yield* http.request("GET", `/flows/${published?.id}/assets`, { token: other.instanceToken })).status).toBe(404)
    }))
})

import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

layer(testHubOnFakeGraph())("QR codes on the Graph API", (it) => {
  it.effect("GET /qr-codes passes fields and cursors upstream and the envelope back", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-qr" })
      const client = yield* hub.client(tenant.instanceToken)
      const result = yield* client.qrCodes.list({
        urlParams: { fields: "code,prefilled_message,deep_link_url,qr_image_url.format(SVG)", limit: 2, after: "QVFI" }
      })
      expect(result).toEqual({
        data: [
          {
            code: "ANED2T5QRU7HG1",
            prefilled_message: "Show me Cyber Monday deals!",
            deep_link_url: "https://wa.me/message/ANED2T5QRU7HG1"
          },
          {
            code: "WOMVT6TJ2BP7A1",
            prefilled_message: "Show me Cyber Monday deals!",
            deep_link_url: "https://wa.me/message/WOMVT6TJ2BP7A1"
          }
        ],
        paging: { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } }
      })
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/message_qrdls`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-qr")
      expect(sent.query).toEqual({
        fields: "code,prefilled_message,deep_link_url,qr_image_url.format(SVG)",
        limit: "2",
        after: "QVFI"
      })

      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      const bad = yield* hub.request("GET", "/qr-codes?fields=code;drop&limit=1000", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([
        {
          field: "fields",
          message: "must be field names, comma separated, such as code,prefilled_message,deep_link_url"
        },
        { field: "limit", message: "must be a whole number from 1 to 100" }
      ])
    }))

  it.effect("GET /qr-codes/{code} unwraps the upstream's data[] into the object; absent is 404", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const client = yield* hub.client(tenant.instanceToken)
      const found = yield* client.qrCodes.get({
        path: { qrCodeId: "ANED2T5QRU7HG1" },
        urlParams: { fields: "code,deep_link_url" }
      })
      expect(found).toEqual({
        code: "ANED2T5QRU7HG1",
        prefilled_message: "Show me Cyber Monday deals!",
        deep_link_url: "https://wa.me/message/ANED2T5QRU7HG1"
      })
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/message_qrdls/ANED2T5QRU7HG1`)
      expect(sent.query).toEqual({ fields: "code,deep_link_url" })

      yield* fake.respond({ path: `/${tenant.phoneNumberId}/message_qrdls/ZZZZZZZZZZZZZZ` }, { body: { data: [] } })
      const empty = yield* refusedWith(
        client.qrCodes.get({ path: { qrCodeId: "ZZZZZZZZZZZZZZ" }, urlParams: {} }),
        "NotFound"
      )
      expect(empty.message).toBe("QR code ZZZZZZZZZZZZZZ was not found")
      expect(empty.error).toBe("not_found")
      expect(empty.details).toBeUndefined()
      yield* fake.respond({ path: `/${tenant.phoneNumberId}/message_qrdls/YYYYYYYYYYYYYY` }, {
        status: 404,
        body: { error: { message: "Object does not exist", code: 803 } }
      })
      const missing = yield* refusedWith(
        client.qrCodes.get({ path: { qrCodeId: "YYYYYYYYYYYYYY" }, urlParams: {} }),
        "NotFound"
      )
      expect(missing.statusCode).toBe(404)
      // Not a QR code: the typed client would refuse to encode the path, so it goes raw.
      const bad = yield* hub.request("GET", "/qr-codes/not-a-code!", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([{ field: "qrCodeId", message: "must be a QR code (letters and digits)" }])
    }))

  it.effect("QR codes are instance-only", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      for (const path of ["/qr-codes", "/qr-codes/ANED2T5QRU7HG1"]) {
        const result = yield* hub.request("GET", `${path}?phone_number_id=${tenant.phoneNumberId}`, {
          token: tenant.orgToken
        })
        expect(result.status).toBe(403)
        expect(result.body).toMatchObject({ statusCode: 403, error: "forbidden_token_kind" })
      }
    }))
})

/**
 * SandboxUpstream through the Upstream service: id formats, the reserved-prefix failures, template
 * approval over (Test)Clock time, status events, settings, media, flows, QR codes and webhooks payloads.
 */
import { expect, layer } from "@effect/vitest"
import { Clock, Context, Duration, Effect, Layer, Queue, Redacted, Stream, TestClock } from "effect"
import { createHash } from "node:crypto"
import { hubConfigWith } from "../src/Config.js"
import { isJsonObject } from "../src/Domain/Json.js"
import { type Json, type JsonObject } from "../src/Domain/Json.js"
import { inboundMessageTypes } from "../src/Domain/Vocabulary.js"
import { SandboxEvents } from "../src/Sandbox/Events.js"
import { RESERVED_FAILURES } from "../src/Sandbox/Graph/Failures.js"
import { inboundMessagePayload } from "../src/Sandbox/Graph/Webhooks.js"
import { SandboxUpstream } from "../src/Sandbox/Upstream.js"
import { Upstream, type UpstreamTarget } from "../src/Upstream/Upstream.js"
import { sendVia } from "./support/UpstreamSend.js"

class Emitted extends Context.Tag("Emitted")<Emitted, Queue.Queue<JsonObject>>() {}

const EmittedLive = Layer.effect(Emitted, Queue.unbounded<JsonObject>())
const CapturingEvents = Layer.effect(
  SandboxEvents,
  Effect.map(Emitted, (queue) => ({ emit: (payload: JsonObject) => Queue.offer(queue, payload) }))
)

/** The sandbox with its events captured; default delays (10 s approval, 1 s per status) driven by TestClock. */
const sandbox = SandboxUpstream.pipe(
  Layer.provide(CapturingEvents),
  Layer.provideMerge(EmittedLive),
  Layer.provide(
    hubConfigWith({
      databaseFile: ":memory:",
      sandboxApprovalDelay: Duration.seconds(10),
      sandboxStatusDelay: Duration.seconds(1)
    })
  )
)

let counter = 0
/** A fresh phone number and WABA per test, so state does not leak between tests. */
const newTarget = (): UpstreamTarget => {
  counter++
  return {
    phoneNumberId: String(106540352242900 + counter),
    wabaId: String(102290129340300 + counter),
    accessToken: Redacted.make("sandbox")
  }
}

const text = (to: string) => ({ messaging_product: "whatsapp", to, type: "text", text: { body: "hello" } })
const templateSend = (to: string, name: string, code = "en_US") => ({
  messaging_product: "whatsapp",
  to,
  type: "template",
  template: { name, language: { code } }
})
const newTemplate = (name: string, language = "en_US") => ({
  name,
  language,
  category: "UTILITY",
  components: [{ type: "BODY", text: "Your order {{1}} is on its way", example: { body_text: [["860198"]] } }]
})

/** The JSON value at a path of keys and indexes, or undefined. */
const at = (value: Json | undefined, ...path: ReadonlyArray<string | number>): Json | undefined => {
  let current = value
  for (const key of path) {
    if (typeof key === "number" && Array.isArray(current)) current = current[key]
    else if (typeof key === "string" && isJsonObject(current)) current = current[key]
    else return undefined
  }
  return current
}
const list = (value: Json | undefined): ReadonlyArray<Json> => (Array.isArray(value) ? value : [])
const statusOf = (payload: JsonObject) => at(payload, "entry", 0, "changes", 0, "value", "statuses", 0)

/**
 * Events of one phone number: the queue and TestClock are shared by the tests of a layer, so
 * earlier tests' sends may still emit; each test uses its own number and skips the others.
 */
const phoneOf = (payload: JsonObject) => at(payload, "entry", 0, "changes", 0, "value", "metadata", "phone_number_id")
const nextEventFor = (target: UpstreamTarget): Effect.Effect<JsonObject, never, Emitted> =>
  Effect.flatMap(
    Emitted,
    (queue) =>
      Effect.flatMap(Queue.take(queue), (payload) =>
        phoneOf(payload) === target.phoneNumberId ? Effect.succeed(payload) : nextEventFor(target))
  )
const pendingEventsFor = (target: UpstreamTarget) =>
  Effect.flatMap(
    Emitted,
    (queue) =>
      Effect.map(Queue.takeAll(queue), (payloads) =>
        [...payloads].filter((payload) => phoneOf(payload) === target.phoneNumberId))
  )

layer(sandbox)("sandbox sends", (it) => {
  it.effect("a text send answers like the upstream with a wamid and the recipient as sent", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const sent = yield* sendVia(upstream, newTarget(), text("+16505551234"))
      expect(sent.messaging_product).toBe("whatsapp")
      expect(sent.contacts).toEqual([{ input: "+16505551234", wa_id: "16505551234" }])
      expect(sent.messages).toHaveLength(1)
      const id = sent.messages[0]?.id ?? ""
      expect(id).toMatch(/^wamid\.[A-Za-z0-9+/]+=*$/)
      expect(Buffer.from(id.slice(6), "base64").toString("latin1")).toContain("16505551234")
      expect(sent.messages[0]?.message_status).toBeUndefined()
    }))

  it.effect("status events follow an accepted send: sent, delivered, read, one status delay apart", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const sent = yield* sendVia(upstream, target, text("16505551234"))
      const wamid = sent.messages[0]?.id
      expect(yield* pendingEventsFor(target)).toEqual([])
      const seen: Array<JsonObject> = []
      const start = yield* Clock.currentTimeMillis
      for (const expected of ["sent", "delivered", "read"]) {
        yield* TestClock.adjust("1 second")
        const payload = yield* nextEventFor(target)
        expect(statusOf(payload)).toMatchObject({ id: wamid, status: expected, recipient_id: "16505551234" })
        seen.push(payload)
      }
      yield* TestClock.adjust("1 minute")
      expect(yield* pendingEventsFor(target)).toEqual([])
      expect(seen[0]).toMatchObject({
        object: "whatsapp_business_account",
        entry: [{
          id: target.wabaId,
          changes: [{
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: { phone_number_id: target.phoneNumberId },
              statuses: [{
                status: "sent",
                timestamp: String(Math.floor(start / 1000) + 1),
                pricing: { billable: false, pricing_model: "PMP", category: "service", type: "free_customer_service" }
              }]
            }
          }]
        }]
      })
    }))

  it.effect("a send with a bad body is refused with code 100, naming the problem", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const cases: Array<[JsonObject, string]> = [
        [{ to: "16505551234", type: "text", text: { body: "x" } }, "messaging_product"],
        [{ messaging_product: "whatsapp", type: "text", text: { body: "x" } }, "to"],
        [{ messaging_product: "whatsapp", to: "16505551234", type: "text", text: {} }, "text.body"],
        [{ messaging_product: "whatsapp", to: "16505551234", type: "hologram", hologram: {} }, "type must be one of"],
        [{
          messaging_product: "whatsapp",
          to: "16505551234",
          type: "image",
          image: { id: "1", link: "https://x.test/a.jpg" }
        }, "exactly one of id or link"],
        [
          { messaging_product: "whatsapp", to: "16505551234", type: "audio", audio: { id: "1", caption: "no" } },
          "caption is not allowed"
        ],
        [{
          messaging_product: "whatsapp",
          to: "16505551234",
          type: "interactive",
          interactive: { type: "product", body: { text: "x" }, action: { catalog_id: "1" } }
        }, "product_retailer_id"]
      ]
      for (const [body, problem] of cases) {
        const error = yield* Effect.flip(sendVia(upstream, target, body))
        expect(error).toMatchObject({ kind: "graph", status: 400, code: 100 })
        expect(error.message).toContain(problem)
      }
    }))

  it.effect("every reserved recipient prefix fails the send with its code, status and Retry-After", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      for (const [prefix, failure] of Object.entries(RESERVED_FAILURES)) {
        const error = yield* Effect.flip(sendVia(upstream, target, text(`${prefix}0001`)))
        expect({ prefix, status: error.status, code: error.code, retryAfter: error.retryAfterSeconds }).toEqual({
          prefix,
          status: failure.status,
          code: failure.code,
          retryAfter: failure.retryAfterSeconds
        })
        expect(error.fbtraceId).toMatch(/^[A-Za-z0-9]{23}$/)
      }
      expect(yield* Effect.flip(sendVia(upstream, newTarget(), text("999131030555")))).toMatchObject({
        message: "(#131030) Recipient phone number not in allowed list",
        details:
          "Recipient phone number not in allowed list: Add recipient phone number to recipient list and try again."
      })
      yield* TestClock.adjust("1 minute")
      expect(yield* pendingEventsFor(target)).toEqual([])
    }))

  it.effect("the instance's own phone number id with a reserved prefix fails every call", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const broken: UpstreamTarget = { ...newTarget(), phoneNumberId: "999500123" }
      expect(yield* Effect.flip(sendVia(upstream, broken, text("16505551234")))).toMatchObject({
        status: 500,
        code: 131000
      })
      expect(yield* Effect.flip(upstream.getSettings(broken, false))).toMatchObject({ status: 500, code: 131000 })
      expect(yield* Effect.flip(upstream.getMedia(newTarget(), "999130429777"))).toMatchObject({
        status: 429,
        code: 130429,
        retryAfterSeconds: 2
      })
    }))

  it.effect("a closed 24 h window: 999131047 is refused at once for free-form messages only", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const error = yield* Effect.flip(sendVia(upstream, target, text("999131047001")))
      expect(error).toMatchObject({
        kind: "graph",
        status: 400,
        code: 131047,
        message: "(#131047) Re-engagement message"
      })
      yield* upstream.createTemplate(target, newTemplate("window_reopen"))
      yield* TestClock.adjust("10 seconds")
      const sent = yield* sendVia(upstream, target, templateSend("999131047001", "window_reopen"))
      expect(sent.messages[0]?.message_status).toBe("accepted")
    }))

  it.effect("a closed 24 h window: 999231047 is accepted, then fails by a status event with error 131047", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const sent = yield* sendVia(upstream, target, text("999231047001"))
      yield* TestClock.adjust("1 second")
      const status = statusOf(yield* nextEventFor(target))
      expect(status).toMatchObject({
        id: sent.messages[0]?.id,
        status: "failed",
        recipient_id: "999231047001",
        errors: [{ code: 131047, title: "Re-engagement message" }]
      })
      expect(status).not.toHaveProperty("pricing")
      yield* TestClock.adjust("10 seconds")
      expect(yield* pendingEventsFor(target)).toEqual([])
    }))
})

layer(sandbox)("sandbox templates", (it) => {
  it.effect("a template is PENDING until the approval delay has passed, then APPROVED and sendable", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const created = yield* upstream.createTemplate(target, newTemplate("order_update"))
      expect(created).toEqual({ id: expect.stringMatching(/^\d{15}$/), status: "PENDING", category: "UTILITY" })
      const id = String(created.id)

      const early = yield* Effect.flip(sendVia(upstream, target, templateSend("16505551234", "order_update")))
      expect(early).toMatchObject({ status: 404, code: 132001, subcode: 2494073 })
      expect(early.details).toBe("template name (order_update) does not exist in en_US")
      expect(yield* upstream.getTemplate(target, id)).toMatchObject({ id, name: "order_update", status: "PENDING" })

      yield* TestClock.adjust("9 seconds")
      expect(yield* upstream.getTemplate(target, id)).toMatchObject({ status: "PENDING" })
      yield* TestClock.adjust("1 second")
      expect(yield* upstream.getTemplate(target, id)).toMatchObject({
        status: "APPROVED",
        language: "en_US",
        category: "UTILITY"
      })
      expect(yield* upstream.listTemplates(target, {})).toMatchObject({
        data: [{ id, name: "order_update", status: "APPROVED" }]
      })

      const sent = yield* sendVia(upstream, target, templateSend("16505551234", "order_update"))
      expect(sent.messages[0]).toEqual({ id: expect.stringMatching(/^wamid\./), message_status: "accepted" })
      const otherLanguage = yield* Effect.flip(
        sendVia(upstream, target, templateSend("16505551234", "order_update", "pt_BR"))
      )
      expect(otherLanguage).toMatchObject({ code: 132001 })
      const otherWaba = yield* Effect.flip(sendVia(upstream, newTarget(), templateSend("16505551234", "order_update")))
      expect(otherWaba).toMatchObject({ code: 132001 })
      expect(yield* Effect.flip(upstream.getTemplate(newTarget(), id))).toMatchObject({
        status: 400,
        code: 100,
        subcode: 33
      })
    }))

  it.effect("a second template with the same name and language is refused with 100 / 2388024", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      yield* upstream.createTemplate(target, newTemplate("welcome"))
      const error = yield* Effect.flip(upstream.createTemplate(target, newTemplate("welcome")))
      expect(error).toMatchObject({ status: 400, code: 100, subcode: 2388024 })
      expect(yield* upstream.createTemplate(target, newTemplate("welcome", "pt_BR"))).toMatchObject({
        status: "PENDING"
      })
    }))
})

layer(sandbox)("sandbox media, settings and account data", (it) => {
  it.effect("uploaded media has a numeric id, info with a string file_size and a sandbox URL serving the bytes until it expires", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const { id } = yield* upstream.uploadMedia(target, {
        filename: "a.pdf",
        mimeType: "application/pdf",
        size: 7,
        content: new Blob(["%PDF-1."])
      })
      expect(id).toMatch(/^\d{16}$/)
      const info = yield* upstream.getMedia(target, id)
      const now = yield* Clock.currentTimeMillis
      expect(info).toEqual({
        messaging_product: "whatsapp",
        url: `http://sandbox.invalid/media/${id}?expires=${Math.floor(now / 1000) + 300}`,
        mime_type: "application/pdf",
        sha256: createHash("sha256").update("%PDF-1.").digest("hex"),
        file_size: "7",
        id
      })
      const download = yield* upstream.downloadMedia(target, info.url)
      const bytes = yield* Stream.runFold(download.body, "", (acc, chunk) => acc + new TextDecoder().decode(chunk))
      expect({ type: download.contentType, length: download.contentLength, bytes }).toEqual({
        type: "application/pdf",
        length: 7,
        bytes: "%PDF-1."
      })

      yield* TestClock.adjust("301 seconds")
      expect(yield* Effect.flip(upstream.downloadMedia(target, info.url))).toMatchObject({ status: 404 })
      expect(yield* Effect.flip(upstream.getMedia(newTarget(), id))).toMatchObject({
        status: 400,
        code: 100,
        subcode: 33
      })
      expect(yield* Effect.flip(upstream.getMedia(target, "123"))).toMatchObject({
        status: 400,
        code: 100,
        subcode: 33
      })
    }))

  it.effect("settings: realistic defaults, SIP passwords only on request, exactly one section per update", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const plain = yield* upstream.getSettings(target, false)
      expect(plain).toMatchObject({
        calling: { status: "ENABLED" },
        payload_encryption: { status: "disabled" },
        storage_configuration: { status: "DEFAULT" }
      })
      expect(JSON.stringify(plain)).not.toContain("sip_user_password")
      const withSecrets = yield* upstream.getSettings(target, true)
      expect(withSecrets).toMatchObject({
        calling: { sip: { servers: [{ sip_user_password: expect.stringMatching(/^[0-9a-f]{24}$/) }] } }
      })

      for (const body of [{}, { calling: { status: "DISABLED" }, storage_configuration: { status: "DEFAULT" } }]) {
        const error = yield* Effect.flip(upstream.updateSettings(target, body))
        expect(error).toMatchObject({ status: 400, code: 100, message: "(#100) One feature setting must be specified" })
      }
      expect(
        yield* upstream.updateSettings(target, {
          storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" }
        })
      ).toEqual({ success: true })
      expect(yield* upstream.updateSettings(target, { calling: { call_icon_visibility: "DISABLE_ALL" } })).toEqual({
        success: true
      })
      const after = yield* upstream.getSettings(target, false)
      expect(after).toMatchObject({
        storage_configuration: { status: "IN_COUNTRY_STORAGE_ENABLED", data_localization_region: "DE" },
        calling: { status: "ENABLED", call_icon_visibility: "DISABLE_ALL" }
      })
      expect(yield* upstream.getSettings(newTarget(), false)).toMatchObject({
        storage_configuration: { status: "DEFAULT" }
      })
    }))

  it.effect("flows: seeded per WABA, only a PUBLISHED flow can be deprecated, once", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const flows = yield* upstream.listFlows(target, {})
      expect(flows.data).toEqual([
        {
          id: expect.stringMatching(/^\d{16}$/),
          name: "sandbox_survey",
          status: "PUBLISHED",
          categories: ["SURVEY"],
          validation_errors: []
        },
        {
          id: expect.stringMatching(/^\d{16}$/),
          name: "sandbox_signup",
          status: "DRAFT",
          categories: ["SIGN_UP"],
          validation_errors: []
        }
      ])
      const published = String(at(flows, "data", 0, "id"))
      const draft = String(at(flows, "data", 1, "id"))
      expect(yield* upstream.deprecateFlow(target, published)).toEqual({ success: true })
      expect(yield* Effect.flip(upstream.deprecateFlow(target, published))).toMatchObject({ status: 400, code: 100 })
      expect(yield* Effect.flip(upstream.deprecateFlow(target, draft))).toMatchObject({ status: 400, code: 100 })
      expect(yield* Effect.flip(upstream.deprecateFlow(target, "1234567890"))).toMatchObject({
        status: 400,
        code: 100,
        subcode: 33
      })
      expect(yield* Effect.flip(upstream.deprecateFlow(newTarget(), draft))).toMatchObject({ code: 100, subcode: 33 })
      expect((yield* upstream.listFlows(target, {})).data).toMatchObject([{ id: published, status: "DEPRECATED" }, {
        status: "DRAFT"
      }])
    }))

  it.effect("flow assets: a FLOW_JSON without a top-level version comes back with a validation error", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const flowId = String(at(yield* upstream.listFlows(target, {}), "data", 1, "id"))
      const upload = (json: string) =>
        upstream.uploadFlowAsset(target, flowId, {
          name: "flow.json",
          assetType: "FLOW_JSON",
          file: { filename: "flow.json", mimeType: "application/json", size: json.length, content: new Blob([json]) }
        })
      expect(yield* upload(JSON.stringify({ screens: [] }))).toMatchObject({
        success: true,
        validation_errors: [{ error: "MISSING_REQUIRED_PROPERTY", error_type: "JSON_SCHEMA_ERROR" }]
      })
      expect(yield* upload(JSON.stringify({ version: "7.2", screens: [] }))).toEqual({
        success: true,
        validation_errors: []
      })
      const assets = yield* upstream.listFlowAssets(target, flowId)
      expect(assets.data).toEqual([{
        name: "flow.json",
        asset_type: "FLOW_JSON",
        download_url: expect.stringContaining(flowId)
      }])
    }))

  it.effect("QR codes: 14-character codes with cursor paging, and one code wrapped in data[]", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      const first = yield* upstream.listQrCodes(target, { limit: "2" })
      expect(list(first.data)).toHaveLength(2)
      for (const qr of list(first.data)) expect(at(qr, "code")).toMatch(/^[A-Z0-9]{14}$/)
      expect(at(first, "paging", "next")).toContain("after=")
      const second = yield* upstream.listQrCodes(target, {
        limit: "2",
        after: String(at(first, "paging", "cursors", "after")),
        fields: "code,prefilled_message"
      })
      expect(second.data).toEqual([{
        code: expect.stringMatching(/^[A-Z0-9]{14}$/),
        prefilled_message: expect.any(String)
      }])
      expect(second.paging).not.toHaveProperty("next")

      const code = String(at(first, "data", 0, "code"))
      expect(yield* upstream.getQrCode(target, code, {})).toEqual({
        data: [{
          code,
          prefilled_message: expect.any(String),
          deep_link_url: `https://wa.me/message/${code}`,
          qr_image_url: expect.any(String)
        }]
      })
      expect(yield* Effect.flip(upstream.getQrCode(target, "AAAAAAAAAAAAAA", {}))).toMatchObject({
        code: 100,
        subcode: 33
      })
      expect(yield* Effect.flip(upstream.listQrCodes(target, { limit: "0" }))).toMatchObject({ code: 100 })
    }))

  it.effect("groups, calls, activities, phone numbers, compliance and profile answer in the upstream's envelopes", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      expect(yield* upstream.getGroup(target, "120363025246125@g.us")).toMatchObject({
        id: "120363025246125@g.us",
        subject: expect.any(String),
        creation_timestamp: expect.any(Number)
      })
      const cloudGroup = "Y2FwaV9ncm91cDoxODA1NTU1MDE3MjoxMjAzNjMyMjI3NzE5NjMwNjcZD"
      const opaque = yield* upstream.getGroup(target, cloudGroup)
      expect(opaque).toMatchObject({
        id: cloudGroup,
        subject: expect.any(String),
        creation_timestamp: expect.any(Number)
      })
      expect(yield* upstream.getGroup(target, cloudGroup)).toEqual(opaque)
      expect(yield* Effect.flip(upstream.getGroup(target, "not-a-group"))).toMatchObject({ code: 100, subcode: 33 })

      expect(
        yield* upstream.callAction(target, { messaging_product: "whatsapp", action: "pre_accept", to: "16505551234" })
      ).toEqual({ messaging_product: "whatsapp", success: true })
      expect(
        yield* Effect.flip(
          upstream.callAction(target, { messaging_product: "whatsapp", action: "pre_accept", to: "999138006111" })
        )
      ).toMatchObject({ code: 138006 })
      expect(
        yield* Effect.flip(
          upstream.callAction(target, {
            messaging_product: "whatsapp",
            action: "pre_accept",
            call_id: "wacid.999138006abc"
          })
        )
      ).toMatchObject({ code: 138006 })
      expect(
        (yield* upstream.callAction(target, { messaging_product: "whatsapp", action: "connect", to: "16505551234" }))
          .calls
      ).toEqual([{ id: expect.stringMatching(/^wacid\./) }])

      const activities = yield* upstream.listActivities(target, { activity_type: "TEMPLATE_CREATED", limit: "2" })
      expect(list(activities.data).map((item) => at(item, "activity_type"))).toEqual([
        "TEMPLATE_CREATED",
        "TEMPLATE_CREATED"
      ])
      expect(activities.paging).toMatchObject({
        cursors: { before: expect.any(String), after: expect.any(String) },
        next: expect.stringContaining("after=")
      })
      const now = yield* Clock.currentTimeMillis
      const recent = yield* upstream.listActivities(target, {
        since: new Date(now - 4 * 86_400_000).toISOString(),
        until: new Date(now).toISOString()
      })
      expect(list(recent.data)).toHaveLength(2)
      expect(yield* Effect.flip(upstream.listActivities(target, { since: "yesterday-ish" }))).toMatchObject({
        code: 100
      })

      expect(yield* upstream.listPhoneNumbers(target, {})).toMatchObject({
        data: [{
          id: target.phoneNumberId,
          verified_name: "Sandbox Business",
          quality_rating: "GREEN",
          status: "CONNECTED",
          display_phone_number: expect.stringMatching(/^\+1 555-/)
        }],
        paging: { cursors: {} }
      })
      expect(yield* upstream.getComplianceInfo(target)).toMatchObject({
        data: [{ whatsapp_business_account_id: target.wabaId, is_registered: true }]
      })
      expect(yield* upstream.getBusinessProfile(target, { fields: "about,email" })).toEqual({
        data: [{ about: expect.any(String), email: "hello@sandbox.invalid" }]
      })
    }))
})

layer(sandbox)("sandbox inbound payloads", (it) => {
  it.effect("an inbound payload of every type carries the content object named like its type", () =>
    Effect.gen(function*() {
      const upstream = yield* Upstream
      const target = newTarget()
      for (const type of inboundMessageTypes) {
        const payload = inboundMessagePayload({
          ...target,
          from: "+16505551234",
          type,
          at: 1750000000000,
          profileName: "Sheena"
        })
        expect(payload).toMatchObject({
          object: "whatsapp_business_account",
          entry: [{
            id: target.wabaId,
            changes: [{
              field: "messages",
              value: {
                messaging_product: "whatsapp",
                metadata: {
                  phone_number_id: target.phoneNumberId,
                  display_phone_number: expect.stringMatching(/^1555\d{7}$/)
                },
                contacts: [{ profile: { name: "Sheena" }, wa_id: "16505551234" }],
                messages: [{
                  from: "16505551234",
                  id: expect.stringMatching(/^wamid\./),
                  timestamp: "1750000000",
                  type
                }]
              }
            }]
          }]
        })
        const content = at(payload, "entry", 0, "changes", 0, "value", "messages", 0, type)
        expect(content).toBeDefined()
        if (["image", "document", "audio", "video", "sticker"].includes(type)) {
          const mediaId = String(at(content, "id"))
          expect(yield* upstream.getMedia(target, mediaId)).toMatchObject({ id: mediaId })
        }
      }
      const reply = inboundMessagePayload({
        ...target,
        from: "16505551234",
        type: "interactive",
        content: { type: "list_reply", list_reply: { id: "row-1", title: "Row 1", description: "First" } },
        contextMessageId: "wamid.ABC",
        at: 0
      })
      expect(reply).toMatchObject({
        entry: [{
          changes: [{
            value: {
              messages: [{
                context: { id: "wamid.ABC" },
                interactive: { type: "list_reply", list_reply: { id: "row-1" } }
              }]
            }
          }]
        }]
      })
    }))
})

/**
 * Meta's own example requests (its Business Messaging OpenAPI document, v23.0), each posted through
 * the hub for every operation the hub offers, against the recording fake Graph server: the upstream
 * must receive the same body, with only the hub's own additions the interface names
 * (`messaging_product`, `recipient_type: individual`, `to` without "+") and the upstream's default
 * `type: text` for a text without type. Placeholders of the examples are filled as a user would.
 */
import { expect, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { fileBytes, form, JPEG_HEAD, OGG_HEAD, WEBP_HEAD } from "./support/Files.js"
import { listMessages, sendMessage, sendsTo, waIdOf } from "./support/Messages.js"
import {
  filledPlaceholders,
  isObject,
  type JsonObject,
  type NamedExample,
  requestExamples,
  responseExamples
} from "./support/MetaReference.js"
import { itemsOf, seedTenant, TestHub, testHub } from "./support/TestHub.js"

const objectOf = (example: NamedExample): JsonObject => {
  const value = filledPlaceholders(example.value)
  if (!isObject(value)) throw new Error(`Meta's example ${example.name} is not a JSON object`)
  return value
}

/** Examples of an operation, less the ones named (each must exist, so the list cannot go stale). */
const examplesBut = (path: string, method: string, left: Readonly<Record<string, string>>) => {
  const all = requestExamples(path, method)
  for (const name of Object.keys(left)) {
    if (!all.some((e) => e.name === name)) {
      throw new Error(`Meta's document no longer has the example "${name}" of ${method.toUpperCase()} ${path}`)
    }
  }
  return all.filter((e) => left[e.name] === undefined)
}

const SENDS = "/{Version}/{Phone-Number-ID}/messages"

/** Examples of the messages path that are no sends, or that the upstream itself refuses. */
const notSends: Readonly<Record<string, string>> = {
  "Send typing indicator and read receipt":
    "marks a message read (a status, not a send); the hub offers no such endpoint",
  "Send Reply to List Message":
    "has `interactive` but no `type`: the upstream reads a missing type as text, so it refuses this example too"
}

/** What the upstream must receive for a send: the example, with the hub's additions the interface names. */
const upstreamBodyOf = (example: JsonObject): JsonObject => ({
  ...example,
  recipient_type: example.recipient_type ?? "individual",
  to: String(example.to).replace(/^\+/, ""),
  ...(example.type === undefined && example.text !== undefined ? { type: "text" } : {})
})

layer(testHubOnFakeGraph())("Meta's example sends through POST /api/messages", (it) => {
  for (const example of examplesBut(SENDS, "post", notSends)) {
    it.effect(`"${example.name}" reaches the upstream as written and is recorded`, () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const body = objectOf(example)
        const sent = yield* sendMessage(tenant.instanceToken, body)
        expect({ status: sent.status, body: sent.body }).toMatchObject({
          status: 200,
          body: { messaging_product: "whatsapp" }
        })
        const received = yield* sendsTo(tenant.phoneNumberId)
        expect(received.map((r) => r.json)).toEqual([upstreamBodyOf(body)])

        const listed = itemsOf((yield* listMessages(tenant.instanceToken)).body)
        expect(listed.map((m) => [m.waMessageId, m.type, m.to, m.direction, m.status])).toEqual([
          [
            waIdOf(sent.body),
            typeof body.type === "string" ? body.type : "text",
            String(body.to).replace(/^\+/, ""),
            "outbound",
            "pending"
          ]
        ])
      }))
  }

  it.effect("the example with interactive content but no type is refused as the upstream refuses it: 400 naming type", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const example = requestExamples(SENDS, "post").find((e) => e.name === "Send Reply to List Message")
      if (example === undefined) return yield* Effect.dieMessage("Meta's document lost its list reply example")
      const refused = yield* sendMessage(tenant.instanceToken, objectOf(example))
      expect(refused.status).toBe(400)
      expect(refused.body).toMatchObject({
        error: "validation_failed",
        details: [{ field: "type", message: "is missing" }]
      })
      expect(yield* sendsTo(tenant.phoneNumberId)).toEqual([])
    }))

  it.effect("every interactive kind of Meta's document is among its examples sent above", () =>
    Effect.sync(() => {
      const kinds = new Set(
        requestExamples(SENDS, "post").flatMap((e) => {
          const value = objectOf(e)
          return isObject(value.interactive) && typeof value.interactive.type === "string"
            ? [value.interactive.type]
            : []
        })
      )
      expect([...kinds].sort()).toEqual([
        "button",
        "catalog_message",
        "flow",
        "list",
        "order_details",
        "order_status",
        "product",
        "product_list"
      ])
    }))
})

layer(testHubOnFakeGraph())("Meta's other example requests through the hub", (it) => {
  for (const example of requestExamples("/{Version}/{WABA-ID}/message_templates", "post")) {
    it.effect(`template "${example.name}" reaches the upstream as written through POST /templates`, () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const body = objectOf(example)
        const created = yield* hub.request("POST", "/templates", { token: tenant.instanceToken, json: body })
        expect({ status: created.status, body: created.body }).toEqual({
          status: 200,
          body: { id: expect.stringMatching(/^\d+$/), status: "PENDING", category: body.category }
        })
        const sent = yield* fake.lastRequest
        expect([sent.method, sent.path, sent.json]).toEqual(["POST", `/v23.0/${tenant.wabaId}/message_templates`, body])
      }))
  }

  for (const example of requestExamples("/{Version}/{Phone-Number-ID}/settings", "post")) {
    it.effect(`settings "${example.name}" reach the upstream as written through POST /api/phone-numbers/settings`, () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const body = objectOf(example)
        const updated = yield* hub.request("POST", "/api/phone-numbers/settings", {
          token: tenant.instanceToken,
          json: body
        })
        expect({ status: updated.status, body: updated.body }).toEqual({ status: 200, body: { success: true } })
        const sent = yield* fake.lastRequest
        expect([sent.method, sent.path, sent.json]).toEqual(["POST", `/v23.0/${tenant.phoneNumberId}/settings`, body])
      }))
  }

  it.effect("calls: Meta's accept example, as a pre-accept (the hub's only call action), reaches the upstream with its call id", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      // The document has no pre_accept example: its accept example has the same body but for the action.
      const examples = examplesBut("/{Version}/{Phone-Number-ID}/calls", "post", {
        "Connect Call": "a business-initiated call: the hub offers no call action but pre-accept",
        "Terminate Call": "the hub offers no call action but pre-accept",
        "Reject Call": "the hub offers no call action but pre-accept"
      })
      expect(examples.map((e) => e.name)).toEqual(["Accept Call"])
      const accept = objectOf(examples[0] ?? { name: "none", value: null })
      const callId = "wacid.HBgLMTIxODU1NTI4MjgVAgARGCAyODRQIAFRoA"
      const answered = yield* hub.request("POST", "/api/calls/pre-accept", {
        token: tenant.instanceToken,
        json: { to: accept.to, call_id: callId, session: accept.session }
      })
      expect({ status: answered.status, body: answered.body }).toEqual({ status: 200, body: { success: true } })
      const sent = yield* fake.lastRequest
      expect([sent.path, sent.json]).toEqual([`/v23.0/${tenant.phoneNumberId}/calls`, {
        ...accept,
        action: "pre_accept",
        call_id: callId
      }])
    }))

  /** The document's uploads are curl lines (`@/local/path/file.ogg;type=ogg`): the file they name, sent as the form the interface gives. */
  const uploads: Readonly<Record<string, { readonly head: ReadonlyArray<number>; readonly type: string }>> = {
    "Upload Audio": { head: OGG_HEAD, type: "audio/ogg" },
    "Upload Image": { head: JPEG_HEAD, type: "image/jpeg" },
    "Upload Sticker": { head: WEBP_HEAD, type: "image/webp" }
  }
  for (const example of requestExamples("/{Version}/{Phone-Number-ID}/media", "post")) {
    it.effect(`media "${example.name}" reaches the upstream as the file, its type and messaging_product`, () =>
      Effect.gen(function*() {
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        const body = objectOf(example)
        const file = /^@(?<path>[^;]+)/.exec(String(body.file))?.groups?.path ?? ""
        const filename = file.split("/").at(-1) ?? ""
        const kind = uploads[example.name]
        if (kind === undefined) {
          return yield* Effect.dieMessage(`no file kind for Meta's upload example ${example.name}`)
        }
        const bytes = fileBytes(kind.head, 2048)
        const uploaded = yield* hub.request("POST", "/media", {
          token: tenant.instanceToken,
          body: form({
            messaging_product: String(body.messaging_product),
            type: kind.type,
            file: { bytes, filename, type: kind.type }
          })
        })
        expect(uploaded.status).toBe(200)
        expect(String(uploaded.body.id)).toMatch(/^\d+$/)
        const sent = yield* fake.lastRequest
        expect(sent.path).toBe(`/v23.0/${tenant.phoneNumberId}/media`)
        const sentFile = sent.form?.file
        expect({
          ...sent.form,
          file: typeof sentFile === "object"
            ? { filename: sentFile.filename, type: sentFile.type, size: sentFile.size }
            : sentFile
        }).toEqual({
          messaging_product: "whatsapp",
          type: kind.type,
          file: { filename, type: kind.type, size: bytes.byteLength }
        })
      }))
  }
})

/**
 * The other way: Meta's example answers of the reads the interface passes through (activities,
 * compliance info, phone numbers, flows and their assets, QR codes) and of the writes above, given
 * by the fake upstream, reach the caller unchanged.
 */
interface PassedThrough {
  readonly path: string
  readonly method: string
  /** The hub's request answered with each example. */
  readonly hub: (tenant: { readonly phoneNumberId: string; readonly wabaId: string }) => {
    readonly method: string
    readonly path: string
    readonly upstream: string
    readonly json?: unknown
  }
}

const passedThrough: ReadonlyArray<PassedThrough> = [
  {
    path: "/{Version}/{WABA-ID}/activities",
    method: "get",
    hub: (t) => ({ method: "GET", path: "/api/analytics/activities", upstream: `/${t.wabaId}/activities` })
  },
  {
    path: "/{Version}/{Phone-Number-ID}/business_compliance_info",
    method: "get",
    hub: (t) => ({
      method: "GET",
      path: "/api/analytics/compliance",
      upstream: `/${t.phoneNumberId}/business_compliance_info`
    })
  },
  {
    path: "/{Version}/{WABA-ID}/phone_numbers",
    method: "get",
    hub: (t) => ({ method: "GET", path: "/phone-numbers/list", upstream: `/${t.wabaId}/phone_numbers` })
  },
  {
    path: "/{Version}/{WABA-ID}/flows",
    method: "get",
    hub: (t) => ({ method: "GET", path: "/flows", upstream: `/${t.wabaId}/flows` })
  },
  {
    path: "/{Version}/{Flow-ID}/assets",
    method: "get",
    hub: () => ({ method: "GET", path: "/flows/1308927590133476/assets", upstream: "/1308927590133476/assets" })
  },
  {
    path: "/{Version}/{Flow-ID}/deprecate",
    method: "post",
    hub: () => ({ method: "POST", path: "/flows/1308927590133476/deprecate", upstream: "/1308927590133476/deprecate" })
  },
  {
    path: "/{Version}/{Phone-Number-ID}/message_qrdls",
    method: "get",
    hub: (t) => ({ method: "GET", path: "/qr-codes", upstream: `/${t.phoneNumberId}/message_qrdls` })
  },
  {
    path: "/{Version}/{Phone-Number-ID}/messages",
    method: "post",
    hub: (t) => ({
      method: "POST",
      path: "/api/messages",
      upstream: `/${t.phoneNumberId}/messages`,
      json: { messaging_product: "whatsapp", to: "16505551234", type: "text", text: { body: "hi" } }
    })
  },
  {
    path: "/{Version}/{Phone-Number-ID}/settings",
    method: "post",
    hub: (t) => ({
      method: "POST",
      path: "/api/phone-numbers/settings",
      upstream: `/${t.phoneNumberId}/settings`,
      json: { calling: { status: "disabled" } }
    })
  }
]

layer(testHubOnFakeGraph())("Meta's example answers back through the hub", (it) => {
  for (const operation of passedThrough) {
    // The read receipt's answer is no send's: that example is no send (see notSends).
    const answers = responseExamples(operation.path, operation.method).filter((a) =>
      a.name !== "Send typing indicator and read receipt"
    )
    it.effect(`${operation.method.toUpperCase()} ${operation.path}: its ${answers.length} example answer(s) reach the caller unchanged`, () =>
      Effect.gen(function*() {
        expect(answers.length).toBeGreaterThan(0)
        const hub = yield* TestHub
        const fake = yield* FakeGraph
        for (const answer of answers) {
          const tenant = yield* seedTenant()
          const call = operation.hub(tenant)
          yield* fake.respond({ method: call.method, path: call.upstream }, { body: answer.value })
          const result = yield* hub.request(call.method, call.path, {
            token: tenant.instanceToken,
            ...(call.json === undefined ? {} : { json: call.json })
          })
          expect({ example: answer.name, status: result.status, body: JSON.parse(result.text) }).toEqual({
            example: answer.name,
            status: 200,
            body: answer.value
          })
        }
      }))
  }
})

layer(testHub({ sandboxStatusDelay: Duration.hours(1) }))("Meta's example sends on the sandbox", (it) => {
  it.effect("the sandbox takes every example send but the template ones (those need an approved template of that name)", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const refused: Array<unknown> = []
      const examples = examplesBut(SENDS, "post", notSends).filter((e) => objectOf(e).type !== "template")
      expect(examples.length).toBeGreaterThan(30)
      for (const example of examples) {
        const sent = yield* sendMessage(tenant.instanceToken, objectOf(example))
        if (sent.status !== 200) refused.push({ example: example.name, status: sent.status, body: sent.body })
      }
      expect(refused).toEqual([])
    }))
})

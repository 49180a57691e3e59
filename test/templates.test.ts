import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import { refusedWith } from "./support/Refusal.js"
import { seedTenant, TestHub } from "./support/TestHub.js"

const marketing = {
  name: "order_update",
  language: "pt_BR",
  category: "MARKETING",
  components: [
    { type: "HEADER", format: "TEXT", text: "Pedido {{1}}", example: { header_text: ["860198"] } },
    {
      type: "BODY",
      text: "Olá {{1}}, seu pedido {{2}} saiu. Obrigado, {{1}}!",
      example: { body_text: [["Ana", "860198"]] }
    },
    { type: "FOOTER", text: "Lucky Shrub" },
    {
      type: "BUTTONS",
      buttons: [
        {
          type: "URL",
          text: "Rastrear",
          url: "https://example.com/t/{{1}}",
          example: ["https://example.com/t/860198"]
        },
        { type: "QUICK_REPLY", text: "Parar" },
        { type: "PHONE_NUMBER", text: "Ligar", phone_number: "16467043595" }
      ]
    }
  ]
} as const

const authentication = {
  name: "login_code",
  language: "en",
  category: "AUTHENTICATION",
  components: [
    { type: "BODY", add_security_recommendation: true },
    { type: "FOOTER", code_expiration_minutes: 10 },
    { type: "BUTTONS", buttons: [{ type: "OTP", otp_type: "COPY_CODE", text: "Copy code" }] }
  ]
} as const

const withComponents = (components: ReadonlyArray<unknown>, category = "UTILITY") => ({
  name: "t",
  language: "en_US",
  category,
  components
})
const body = (text: string, example?: unknown) => ({
  type: "BODY",
  text,
  ...(example === undefined ? {} : { example })
})

const templateRequests = Effect.map(
  Effect.flatMap(FakeGraph, (fake) => fake.requests),
  (all) => all.filter((r) => r.path.includes("message_templates"))
)

layer(testHubOnFakeGraph())("templates on the Graph API", (it) => {
  it.effect("POST /templates sends the template to the business account and answers {id, status, category}", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant({ accessToken: "EAAG-templates" })
      const created = yield* (yield* hub.client(tenant.instanceToken)).templates.create({ payload: marketing })
      // No other key: the answer is checked against the document, whose TemplateCreated allows none.
      expect(Object.keys(created).sort()).toEqual(["category", "id", "status"])
      expect(created).toMatchObject({ status: "PENDING", category: "MARKETING" })
      expect(created.id).toMatch(/^\d+$/)
      const sent = yield* fake.lastRequest
      expect(sent.method).toBe("POST")
      expect(sent.path).toBe(`/v23.0/${tenant.wabaId}/message_templates`)
      expect(sent.headers.authorization).toBe("Bearer EAAG-templates")
      expect(sent.json).toEqual(marketing)
    }))

  it.effect("an AUTHENTICATION template with a text-less body and one OTP button is accepted", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      const created = yield* (yield* hub.client(tenant.instanceToken)).templates.create({ payload: authentication })
      expect(created).toMatchObject({ status: "PENDING", category: "AUTHENTICATION" })
      expect((yield* fake.lastRequest).json).toEqual(authentication)
    }))

  it.effect("the upstream's category and status win over the request's", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "POST", path: `/${tenant.wabaId}/message_templates` }, {
        body: { id: "594425479261596", status: "APPROVED", category: "UTILITY" }
      })
      const created = yield* (yield* hub.client(tenant.instanceToken)).templates.create({ payload: marketing })
      expect(created).toEqual({ id: "594425479261596", status: "APPROVED", category: "UTILITY" })
    }))

  it.effect("each broken rule is a 400 naming the component index and the rule, and nothing goes upstream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const cases: ReadonlyArray<readonly [unknown, ReadonlyArray<{ field: string; message: string }>]> = [
        [{ ...marketing, name: "Order Update", category: "PROMO" }, [
          {
            field: "name",
            message: "must be snake_case: lowercase letters, digits and underscores, at most 512 characters"
          },
          { field: "category", message: "must be MARKETING, UTILITY or AUTHENTICATION" }
        ]],
        [{ ...marketing, language: "portuguese" }, [{
          field: "language",
          message: "must be a language code such as en, en_US or pt_BR"
        }]],
        [{ name: "x", language: "en" }, [{ field: "category", message: "is missing" }, {
          field: "components",
          message: "is missing"
        }]],
        [withComponents([]), [{ field: "components", message: "must hold at least one component" }]],
        [withComponents([{ type: "FOOTER", text: "f" }]), [{
          field: "components",
          message: "a template needs exactly one BODY component"
        }]],
        [withComponents([body("a"), body("b")]), [{
          field: "components.1.type",
          message: "a template has at most one BODY component"
        }]],
        [withComponents([{ type: "CAROUSEL" }, body("a")]), [{
          field: "components.0.type",
          message: "must be one of HEADER, BODY, FOOTER, BUTTONS"
        }]],
        [withComponents([{ type: "HEADER", format: "TEXT", text: "x".repeat(61) }, body("a")]), [
          { field: "components.0.text", message: "must be at most 60 characters" }
        ]],
        [withComponents([{ type: "HEADER", format: "TEXT", text: "{{1}} and {{2}}" }, body("a")]), [
          { field: "components.0.text", message: "may hold at most one placeholder, written {{1}}" }
        ]],
        [withComponents([{ type: "HEADER", format: "IMAGE" }, body("a")]), [
          {
            field: "components.0.example.header_handle",
            message: "a header of format IMAGE needs an example media handle (example.header_handle: [<handle>])"
          }
        ]],
        [withComponents([{ type: "HEADER", format: "GIF" }, body("a")]), [
          { field: "components.0.format", message: "must be one of TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION" }
        ]],
        [withComponents([body("Hi {{1}}, order {{3}}")]), [
          {
            field: "components.0.text",
            message: "placeholders must be numbered {{1}} to {{2}} without gaps; found {{1}}, {{3}}"
          }
        ]],
        [withComponents([body("Hi {{name}}")]), [{
          field: "components.0.text",
          message: "placeholders must be numbered, like {{1}}"
        }]],
        [withComponents([body("Hi {{1}}, order {{2}}", { body_text: [["Ana"]] })]), [
          {
            field: "components.0.example.body_text",
            message: "must be [[...]] holding exactly 2 string(s), one per placeholder"
          }
        ]],
        [withComponents([body("x".repeat(1025))]), [{
          field: "components.0.text",
          message: "must be at most 1024 characters"
        }]],
        [withComponents([{ type: "BODY" }]), [{
          field: "components.0.text",
          message: "is required and must be a non-empty string"
        }]],
        [withComponents([body("a"), { type: "FOOTER", text: "x".repeat(61) }]), [{
          field: "components.1.text",
          message: "must be at most 60 characters"
        }]],
        [withComponents([body("a"), { type: "BUTTONS", buttons: [] }]), [{
          field: "components.1.buttons",
          message: "must be a non-empty array"
        }]],
        [
          withComponents([body("a"), {
            type: "BUTTONS",
            buttons: [{ type: "URL", text: "Go", url: "ftp://example.com" }]
          }]),
          [
            { field: "components.1.buttons.0.url", message: "is required and must be an http(s) URL" }
          ]
        ],
        [
          withComponents([body("a"), {
            type: "BUTTONS",
            buttons: [{ type: "URL", text: "Go", url: "https://e.com/{{1}}/x", example: ["a"] }]
          }]),
          [
            { field: "components.1.buttons.0.url", message: "may hold one placeholder, {{1}}, at its end" }
          ]
        ],
        [
          withComponents([body("a"), {
            type: "BUTTONS",
            buttons: [{ type: "URL", text: "Go", url: "https://e.com/{{1}}" }]
          }]),
          [
            {
              field: "components.1.buttons.0.example",
              message: "a URL with {{1}} needs an example: an array of one string"
            }
          ]
        ],
        [
          withComponents([body("a"), {
            type: "BUTTONS",
            buttons: [{ type: "QUICK_REPLY" }, { type: "OTP", otp_type: "COPY_CODE" }]
          }]),
          [
            { field: "components.1.buttons.0.text", message: "is required and must be a non-empty string" },
            { field: "components.1.buttons.1.type", message: "OTP buttons belong to AUTHENTICATION templates" }
          ]
        ],
        [{
          ...authentication,
          components: [{ type: "BODY", text: "Your code is {{1}}" }, authentication.components[2]]
        }, [
          { field: "components.0.text", message: "an AUTHENTICATION body has no text (the upstream supplies it)" }
        ]],
        [{ ...authentication, components: [{ type: "BODY" }] }, [
          { field: "components", message: "an AUTHENTICATION template needs a BUTTONS component with one OTP button" }
        ]],
        [{
          ...authentication,
          components: [{ type: "BODY" }, { type: "BUTTONS", buttons: [{ type: "QUICK_REPLY", text: "No" }] }]
        }, [
          { field: "components.1.buttons.0.type", message: "an AUTHENTICATION template has exactly one OTP button" }
        ]],
        [{
          ...authentication,
          components: [{ type: "BODY" }, { type: "BUTTONS", buttons: [{ type: "OTP", otp_type: "MAGIC" }] }]
        }, [
          { field: "components.1.buttons.0.otp_type", message: "must be COPY_CODE, ONE_TAP or ZERO_TAP" }
        ]],
        [{
          ...authentication,
          components: [
            { type: "HEADER", format: "IMAGE", example: { header_handle: ["h"] } },
            ...authentication.components
          ]
        }, [
          { field: "components.0.format", message: "an AUTHENTICATION template cannot have a media header" }
        ]]
      ]
      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      for (const [template, details] of cases) {
        const result = yield* hub.request("POST", "/templates", { token: tenant.instanceToken, json: template })
        expect({ template, status: result.status, error: result.body.error, details: result.body.details }).toEqual({
          template,
          status: 400,
          error: "validation_failed",
          details
        })
      }
      expect(yield* templateRequests).toEqual([])
    }))

  it.effect("an upstream refusal keeps its status and message with details.upstream", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant()
      yield* fake.respond({ method: "POST", path: `/${tenant.wabaId}/message_templates` }, {
        status: 400,
        body: { error: { message: "Invalid parameter", code: 100, error_subcode: 2388024, fbtrace_id: "AbC" } }
      })
      const refused = yield* refusedWith(
        (yield* hub.client(tenant.instanceToken)).templates.create({ payload: marketing }),
        "UpstreamFailure"
      )
      expect(refused.status).toBe(400)
      expect({ message: refused.message, error: refused.error, details: refused.details }).toEqual({
        message: "Invalid parameter",
        error: "upstream_error",
        details: { upstream: { code: 100, error_subcode: 2388024, fbtrace_id: "AbC" } }
      })
    }))

  it.effect("GET /templates passes the filters upstream and the envelope back", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      const tenant = yield* seedTenant({ accessToken: "EAAG-list" })
      const envelope = {
        data: [{
          id: "594425479261596",
          name: "order_update",
          language: "pt_BR",
          status: "APPROVED",
          category: "MARKETING",
          components: [{ type: "BODY", text: "Hi" }]
        }],
        paging: {
          cursors: { before: "QVFIUjNp", after: "QVFIUjNq" },
          next: "https://graph.facebook.com/v23.0/1/message_templates?after=QVFIUjNq"
        }
      }
      yield* fake.respond({ method: "GET", path: `/${tenant.wabaId}/message_templates` }, { body: envelope })
      const listed = yield* (yield* hub.client(tenant.instanceToken)).templates.list({
        urlParams: { limit: 10, status: "APPROVED", name: "order", after: "QVFIUjNp" }
      })
      expect(listed).toEqual(envelope)
      const sent = yield* fake.lastRequest
      expect(sent.path).toBe(`/v23.0/${tenant.wabaId}/message_templates`)
      expect(sent.query).toEqual({ limit: "10", status: "APPROVED", name: "order", after: "QVFIUjNp" })
      expect(sent.headers.authorization).toBe("Bearer EAAG-list")

      // Invalid on purpose: the typed client would refuse to encode these, so they go raw.
      const bad = yield* hub.request("GET", "/templates?limit=0&status=LIVE", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([
        { field: "limit", message: "must be a whole number from 1 to 100" },
        { field: "status", message: "must be a template status such as APPROVED, PENDING or REJECTED" }
      ])
    }))

  it.effect("GET /templates/{id}: the template when listed under the instance's account, else 404", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const template = {
        id: "594425479261596",
        name: "order_update",
        language: "pt_BR",
        status: "APPROVED",
        category: "MARKETING",
        components: []
      }
      yield* fake.respond({ method: "GET", path: "/594425479261596" }, { body: template }, 2)
      yield* fake.respond({ method: "GET", path: `/${tenant.wabaId}/message_templates` }, {
        body: { data: [{ id: "594425479261596" }, { id: "1" }] }
      })
      const client = yield* hub.client(tenant.instanceToken)
      const found = yield* client.templates.get({ path: { templateId: "594425479261596" } })
      expect(found).toEqual(template)
      const ownership = (yield* templateRequests)[0]
      expect(ownership?.query).toEqual({ name: "order_update", fields: "id", limit: "100" })

      // Reachable with the token but belonging to another business account: 404 like a missing one.
      yield* fake.respond({ method: "GET", path: `/${tenant.wabaId}/message_templates` }, {
        body: { data: [{ id: "1" }] }
      })
      const foreign = yield* refusedWith(client.templates.get({ path: { templateId: "594425479261596" } }), "NotFound")
      expect({ message: foreign.message, error: foreign.error, details: foreign.details }).toEqual({
        message: "template 594425479261596 was not found",
        error: "not_found",
        details: undefined
      })

      yield* fake.respond({ method: "GET", path: "/777" }, {
        status: 400,
        body: {
          error: {
            message: "Unsupported get request. Object with ID '777' does not exist",
            code: 100,
            error_subcode: 33
          }
        }
      })
      const missing = yield* refusedWith(client.templates.get({ path: { templateId: "777" } }), "NotFound")
      expect({ message: missing.message, error: missing.error, details: missing.details }).toEqual({
        message: "template 777 was not found",
        error: "not_found",
        details: undefined
      })

      // Not numeric: the typed client would refuse to encode the path, so it goes raw.
      const bad = yield* hub.request("GET", "/templates/order_update", { token: tenant.instanceToken })
      expect(bad.status).toBe(400)
      expect(bad.body.details).toEqual([{ field: "templateId", message: "must be a numeric Graph id (digits only)" }])
    }))

  it.effect("organization tokens are refused on every template endpoint", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const fake = yield* FakeGraph
      yield* fake.reset
      const tenant = yield* seedTenant()
      const client = yield* hub.client(tenant.orgToken)
      for (
        const call of [
          client.templates.create({ payload: marketing }),
          client.templates.list({ urlParams: {} }),
          client.templates.get({ path: { templateId: "123" } })
        ]
      ) {
        const refused = yield* refusedWith(call, "Forbidden")
        expect(refused.error).toBe("forbidden_token_kind")
      }
      expect(yield* fake.requests).toEqual([])
    }))
})

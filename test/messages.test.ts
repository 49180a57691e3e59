/**
 * POST /api/messages against a recording fake Graph server: the exact upstream request for every
 * message type, validation, instance resolution, error mapping, idempotency and pacing.
 *
 * Feature tests talk through the typed client (sendTyped, historyOf); raw requests stay for the wire
 * and the edge, each in a describe block or line that says why.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it as plain, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, Scope, TestClock } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { errorBody } from "../src/Domain/Errors.js"
import { sqliteLayer } from "../src/Sql/Client.js"
import { engines } from "./support/Databases.js"
import { FakeGraph, testHubOnFakeGraph } from "./support/FakeGraph.js"
import {
  fieldsOf,
  historyOf,
  sendMessage,
  sendsTo,
  sendTyped,
  sendTypedAnswering,
  typeCases,
  untilSendsReach,
  whileAcceptanceRefused
} from "./support/Messages.js"
import { refusedWith } from "./support/Refusal.js"
import { addInstance, seedTenant, TestHub } from "./support/TestHub.js"
import { individualMessage } from "./support/TypedRequests.js"

const RECIPIENT = "16505551234"
const common = { messaging_product: "whatsapp", recipient_type: "individual", to: RECIPIENT }
/** A typed text message to RECIPIENT. */
const hi = { ...individualMessage, to: RECIPIENT, type: "text", text: { body: "hi" } } as const

for (const engine of engines) {
  layer(testHubOnFakeGraph({ engine, graphTimeout: Duration.seconds(1) }))(
    `POST /api/messages on the Graph API (${engine})`,
    (it) => {
      for (const typeCase of typeCases) {
        it.effect(`sends ${typeCase.name} as the exact upstream body and records it`, () =>
          Effect.gen(function*() {
            const tenant = yield* seedTenant({ accessToken: "EAAG-instance-secret" })
            const sent = yield* sendTyped(tenant.instanceToken, {
              ...individualMessage,
              to: RECIPIENT,
              ...typeCase.request
            })
            expect(sent).toEqual({
              messaging_product: "whatsapp",
              contacts: [{ input: RECIPIENT, wa_id: RECIPIENT }],
              messages: [{
                id: expect.stringMatching(/^wamid\./),
                ...(typeCase.request.type === "template" ? { message_status: "accepted" } : {})
              }]
            })
            const received = yield* sendsTo(tenant.phoneNumberId)
            expect(received).toHaveLength(1)
            expect(received[0]?.headers.authorization).toBe("Bearer EAAG-instance-secret")
            expect(received[0]?.json).toEqual({ ...common, ...typeCase.request })

            const listed = yield* historyOf(tenant.instanceToken)
            expect(listed.total).toBe(1)
            expect(listed.data).toEqual([{
              id: expect.stringMatching(/^msg_/),
              waMessageId: sent.messages[0]?.id,
              to: RECIPIENT,
              // Sent through /messages (a MARKETING template would say marketing_messages: marketing-messages.test.ts).
              endpoint: "messages",
              type: typeCase.request.type,
              status: "pending",
              direction: "outbound",
              createdAt: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
              // Pending: no step yet (its time is createdAt).
              statusTimes: {}
            }])
          }))
      }

      it.effect("answers the upstream's send response unchanged, extra fields included", () =>
        Effect.gen(function*() {
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          const answer = {
            messaging_product: "whatsapp",
            contacts: [{ input: "+16505551234", wa_id: "16505551234" }],
            messages: [{
              id: "wamid.HBgLMTY1MDUwNzY1MjAVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA",
              message_status: "held_for_quality_assessment"
            }],
            x_extra: { kept: true }
          }
          yield* fake.respond({ method: "POST", path: `/${tenant.phoneNumberId}/messages` }, { body: answer })
          expect(yield* sendTyped(tenant.instanceToken, hi)).toEqual(answer)
        }))

      it.effect("forwards unknown top-level keys unchanged and never sends phone_number_id upstream", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          // The typed client carries the keys the hub does not model as `forwarded`, and sends them top-level.
          yield* sendTyped(tenant.orgToken, {
            ...hi,
            phone_number_id: tenant.phoneNumberId,
            forwarded: { biz_note: "a field the hub does not model" }
          })
          expect((yield* sendsTo(tenant.phoneNumberId))[0]?.json).toEqual({
            ...common,
            type: "text",
            text: { body: "hi" },
            biz_note: "a field the hub does not model"
          })
        }))

      it.effect("a message to a group (recipient_type group) goes to the group id, in either form, and is recorded with it", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const groups = ["120363394320896415@g.us", "Y2FwaV9ncm91cDoxODA1NTU1MDE3MjoxMjAzNjMyMjI3NzE5NjMwNjcZD"]
          for (const group of groups) {
            yield* sendTyped(tenant.instanceToken, {
              messaging_product: "whatsapp",
              recipient_type: "group",
              to: group,
              type: "text",
              text: { body: "Hello group" }
            })
          }
          expect((yield* sendsTo(tenant.phoneNumberId)).map((r) => r.json)).toEqual(groups.map((group) => ({
            messaging_product: "whatsapp",
            recipient_type: "group",
            to: group,
            type: "text",
            text: { body: "Hello group" }
          })))
          expect((yield* historyOf(tenant.instanceToken)).data.map((m) => m.to).sort()).toEqual([...groups].sort())
        }))

      it.effect("an organization token sends from the number it names, and must name one of its own", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant({ accessToken: "EAAG-org-instance" })
          const other = yield* seedTenant()

          yield* sendTyped(tenant.orgToken, { ...hi, phone_number_id: tenant.phoneNumberId })
          const received = yield* sendsTo(tenant.phoneNumberId)
          expect(received).toHaveLength(1)
          expect(received[0]?.headers.authorization).toBe("Bearer EAAG-org-instance")

          const unnamed = yield* refusedWith(sendTyped(tenant.orgToken, hi), "BadRequest")
          expect(unnamed.error).toBe("instance_required")

          const foreign = yield* refusedWith(
            sendTyped(tenant.orgToken, { ...hi, phone_number_id: other.phoneNumberId }),
            "NotFound"
          )
          expect(foreign.error).toBe("not_found")
          expect(yield* sendsTo(other.phoneNumberId)).toHaveLength(0)

          // Again, with the token and both instances known: the fast lane's plain send, and the same 404s.
          yield* sendTyped(tenant.orgToken, { ...hi, phone_number_id: tenant.phoneNumberId })
          expect((yield* sendsTo(tenant.phoneNumberId)).map((r) => r.headers.authorization)).toEqual([
            "Bearer EAAG-org-instance",
            "Bearer EAAG-org-instance"
          ])
          const again = yield* refusedWith(
            sendTyped(tenant.orgToken, { ...hi, phone_number_id: other.phoneNumberId }),
            "NotFound"
          )
          expect(again.error).toBe("not_found")
          const stranger = yield* refusedWith(
            sendTyped(other.orgToken, { ...hi, phone_number_id: tenant.phoneNumberId }),
            "NotFound"
          )
          expect(stranger.error).toBe("not_found")
          expect(yield* sendsTo(other.phoneNumberId)).toHaveLength(0)
          expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(2)
        }))

      it.effect("an organization token's instance is read once: instances never change, so later sends do not read it again", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const tenant = yield* seedTenant()
          yield* sendTyped(tenant.orgToken, { ...hi, phone_number_id: tenant.phoneNumberId })
          // Were the instance read again, this number would no longer be found.
          yield* sql`UPDATE instances SET phone_number_id = ${`9${tenant.phoneNumberId}`} WHERE id = ${tenant.instanceId}`
          yield* sendTyped(tenant.orgToken, { ...hi, phone_number_id: tenant.phoneNumberId })
          expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(2)
        }))

      it.effect("an instance token sends from its own number; naming another number is a 403", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const sibling = yield* seedTenant()
          yield* sendTyped(tenant.instanceToken, { ...hi, phone_number_id: tenant.phoneNumberId })
          const refused = yield* refusedWith(
            sendTyped(tenant.instanceToken, { ...hi, phone_number_id: sibling.phoneNumberId }),
            "Forbidden"
          )
          expect(refused.error).toBe("forbidden_instance")
          expect(yield* sendsTo(sibling.phoneNumberId)).toHaveLength(0)
          expect((yield* historyOf(tenant.instanceToken)).total).toBe(1)
        }))

      it.effect("maps Graph code 100 to a 400 with the upstream message and details.upstream, and records the failure", () =>
        Effect.gen(function*() {
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
            status: 400,
            body: {
              error: {
                message: "(#100) Invalid parameter",
                type: "OAuthException",
                code: 100,
                error_subcode: 2494010,
                fbtrace_id: "AbCdEf123"
              }
            }
          })
          const refused = yield* refusedWith(sendTyped(tenant.instanceToken, hi), "UpstreamFailure")
          expect(errorBody(refused)).toEqual({
            statusCode: 400,
            message: "(#100) Invalid parameter",
            error: "upstream_error",
            details: { upstream: { code: 100, error_subcode: 2494010, fbtrace_id: "AbCdEf123" } }
          })
          const listed = yield* historyOf(tenant.instanceToken)
          expect(listed.data).toEqual([
            expect.objectContaining({ status: "failed", waMessageId: null, to: "16505551234", type: "text" })
          ])
          // A refused send failed when the upstream refused it: that is its only step.
          expect(listed.data[0]?.statusTimes).toEqual({ failed: expect.stringMatching(/^\d{4}-/) })
        }))

      it.effect("maps 131030 (recipient not allowed) to a 400 and leaves a failed record in the history", () =>
        Effect.gen(function*() {
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
            status: 400,
            body: {
              error: {
                message: "(#131030) Recipient phone number not in allowed list",
                type: "OAuthException",
                code: 131030,
                error_data: { messaging_product: "whatsapp", details: "Recipient phone number not in allowed list" },
                fbtrace_id: "Xyz"
              }
            }
          })
          const refused = yield* refusedWith(
            sendTyped(tenant.instanceToken, {
              ...individualMessage,
              to: "16505550000",
              type: "image",
              image: { id: "123" }
            }),
            "UpstreamFailure"
          )
          expect(refused.status).toBe(400)
          expect(refused.message).toBe("(#131030) Recipient phone number not in allowed list")
          expect(refused.details).toEqual({
            upstream: { code: 131030, fbtrace_id: "Xyz", details: "Recipient phone number not in allowed list" }
          })
          const failed = yield* historyOf(tenant.instanceToken, { status: "failed" })
          expect(failed.total).toBe(1)
          expect(failed.data[0]).toMatchObject({
            status: "failed",
            waMessageId: null,
            to: "16505550000",
            type: "image",
            direction: "outbound"
          })
        }))

      it.effect("maps a Graph 500 to 502", () =>
        Effect.gen(function*() {
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
            status: 500,
            body: {
              error: {
                message: "(#131000) Something went wrong",
                type: "OAuthException",
                code: 131000,
                is_transient: true,
                fbtrace_id: "S1"
              }
            }
          })
          const refused = yield* refusedWith(sendTyped(tenant.instanceToken, hi), "UpstreamFailure")
          expect(errorBody(refused)).toMatchObject({
            statusCode: 502,
            message: "(#131000) Something went wrong",
            error: "upstream_error"
          })
          expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
        }))

      it.effect("maps an upstream that does not answer to 504 and keeps the send pending (its outcome is unknown)", () =>
        Effect.gen(function*() {
          const fake = yield* FakeGraph
          const tenant = yield* seedTenant()
          yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, { hang: true })
          // The upstream client's deadline runs on the wall clock (graphTimeout, 1 s here).
          const refused = yield* refusedWith(sendTyped(tenant.instanceToken, hi), "UpstreamFailure")
          expect(errorBody(refused)).toMatchObject({ statusCode: 504, error: "upstream_timeout" })
          const listed = yield* historyOf(tenant.instanceToken)
          expect(listed.data).toEqual([expect.objectContaining({ status: "pending", waMessageId: null })])
        }))

      // Raw: what these show is on the wire (a "+" number, a coordinate as a string, a text without type,
      // the Retry-After header, a dropped connection) or refused at the edge (a session token).
      describe("on the wire", () => {
        it.effect("a number with its leading \"+\" goes upstream and is recorded as bare digits", () =>
          Effect.gen(function*() {
            const tenant = yield* seedTenant()
            const sent = yield* sendMessage(tenant.instanceToken, {
              to: `+${RECIPIENT}`,
              type: "text",
              text: { body: "hi" }
            })
            expect(sent.status).toBe(200)
            expect(sent.body.contacts).toEqual([{ input: RECIPIENT, wa_id: RECIPIENT }])
            expect((yield* sendsTo(tenant.phoneNumberId)).map((r) => r.json)).toEqual([
              { ...common, type: "text", text: { body: "hi" } }
            ])
            expect((yield* historyOf(tenant.instanceToken)).data.map((m) => m.to)).toEqual([RECIPIENT])
          }))

        it.effect("a coordinate written as a string, as Meta's examples write it, goes upstream as a number", () =>
          Effect.gen(function*() {
            const tenant = yield* seedTenant()
            const location = {
              latitude: 37.44216,
              longitude: "-122.16153",
              name: "Philz Coffee",
              address: "101 Forest Ave"
            }
            const sent = yield* sendMessage(tenant.instanceToken, { to: RECIPIENT, type: "location", location })
            expect(sent.status).toBe(200)
            expect((yield* sendsTo(tenant.phoneNumberId))[0]?.json).toEqual({
              ...common,
              type: "location",
              location: { latitude: 37.44216, longitude: -122.16153, name: "Philz Coffee", address: "101 Forest Ave" }
            })
          }))

        it.effect("a text without type is a text message, as upstream: sent with type text and recorded so", () =>
          Effect.gen(function*() {
            const tenant = yield* seedTenant()
            const sent = yield* sendMessage(tenant.instanceToken, {
              to: RECIPIENT,
              text: { body: "Please visit https://youtu.be/hpltvTEiRrY.", preview_url: true }
            })
            expect(sent.status).toBe(200)
            expect((yield* sendsTo(tenant.phoneNumberId))[0]?.json).toEqual({
              ...common,
              type: "text",
              text: { body: "Please visit https://youtu.be/hpltvTEiRrY.", preview_url: true }
            })
            expect((yield* historyOf(tenant.instanceToken)).data.map((m) => [m.type, m.to])).toEqual([[
              "text",
              RECIPIENT
            ]])
          }))

        it.effect("a session token cannot send", () =>
          Effect.gen(function*() {
            const tenant = yield* seedTenant()
            const refused = yield* sendMessage(tenant.sessionToken, {
              to: "16505551234",
              type: "text",
              text: { body: "hi" }
            })
            expect(refused.status).toBe(403)
            expect(refused.body.error).toBe("forbidden_token_kind")
          }))

        for (
          const [code, status, retryAfter] of [[130429, 429, "7"], [131056, 400, undefined], [4, 400, undefined], [
            80007,
            429,
            "30"
          ]] as const
        ) {
          it.effect(`maps throttling code ${code} (HTTP ${status}) to 429 with Retry-After`, () =>
            Effect.gen(function*() {
              const fake = yield* FakeGraph
              const tenant = yield* seedTenant()
              yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
                status,
                body: {
                  error: { message: `(#${code}) Rate limit hit`, type: "OAuthException", code, fbtrace_id: "T1" }
                },
                ...(retryAfter === undefined ? {} : { headers: { "retry-after": retryAfter } })
              })
              const sent = yield* sendMessage(tenant.instanceToken, {
                to: "16505551234",
                type: "text",
                text: { body: "hi" }
              })
              expect(sent.status).toBe(429)
              expect(sent.headers.get("retry-after")).toBe(retryAfter ?? "60")
              expect(sent.body).toMatchObject({
                statusCode: 429,
                message: `(#${code}) Rate limit hit`,
                error: "upstream_rate_limited"
              })
              expect(sent.body.details).toEqual({ upstream: { code, fbtrace_id: "T1" } })
            }))
        }

        it.effect("a client that hangs up does not cut its send short: the outcome is still recorded", () =>
          Effect.gen(function*() {
            const hub = yield* TestHub
            const fake = yield* FakeGraph
            const sql = yield* SqlClient.SqlClient
            const tenant = yield* seedTenant()
            yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, { hang: true })
            const client = new AbortController()
            const request = fetch(`${hub.baseUrl}/api/messages`, {
              method: "POST",
              headers: { authorization: `Bearer ${tenant.instanceToken}`, "content-type": "application/json" },
              body: JSON.stringify({ to: "16505551234", type: "text", text: { body: "hi" } }),
              signal: client.signal
            }).catch((e: unknown) => e)
            yield* untilSendsReach(tenant.phoneNumberId, 1)
            client.abort()
            yield* Effect.promise(() => request)
            // The send goes on to its deadline (graphTimeout, 1 s) and notes the timeout on its record;
            // a send interrupted with its request would leave the record without any error.
            const noted = sql<
              { readonly error: string | null }
            >`SELECT error FROM messages WHERE instance_id = ${tenant.instanceId}`.pipe(
              Effect.orDie,
              Effect.map((rows) => rows[0]?.error ?? null)
            )
            for (let attempt = 0; attempt < 300 && (yield* noted) === null; attempt++) {
              yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
            }
            expect(JSON.parse((yield* noted) ?? "{}")).toMatchObject({ kind: "timeout" })
          }))
      })
    }
  )
}

interface InvalidCase {
  readonly name: string
  readonly body: unknown
  readonly fields: ReadonlyArray<string>
}

const text = (extra: Record<string, unknown>) => ({ to: "16505551234", type: "text", text: { body: "hi" }, ...extra })
const image = (media: Record<string, unknown>) => ({ to: "16505551234", type: "image", image: media })

const invalidCases: ReadonlyArray<InvalidCase> = [
  { name: "too short a number", body: text({ to: "+1234" }), fields: ["to"] },
  { name: "two plus signs", body: text({ to: "++16505551234" }), fields: ["to"] },
  { name: "a number with separators", body: text({ to: "1 650-555-1234" }), fields: ["to"] },
  { name: "no type (and no text)", body: { to: "16505551234", image: { id: "1" } }, fields: ["type"] },
  {
    name: "no type, text and another object",
    body: { to: "16505551234", text: { body: "hi" }, image: { id: "1" } },
    fields: ["image"]
  },
  { name: "an unknown type", body: { to: "16505551234", type: "sms", sms: {} }, fields: ["type"] },
  { name: "the object named by type missing", body: { to: "16505551234", type: "text" }, fields: ["text"] },
  { name: "an object of another type", body: text({ image: { id: "1" } }), fields: ["image"] },
  { name: "an empty text body", body: text({ text: { body: "" } }), fields: ["text.body"] },
  { name: "a text body over 4096 characters", body: text({ text: { body: "x".repeat(4097) } }), fields: ["text.body"] },
  {
    name: "a non-boolean preview_url",
    body: text({ text: { body: "hi", preview_url: "yes" } }),
    fields: ["text.preview_url"]
  },
  {
    name: "an image with both link and id",
    body: image({ link: "https://example.com/a.jpg", id: "1" }),
    fields: ["image"]
  },
  { name: "an image with neither link nor id", body: image({ caption: "alone" }), fields: ["image"] },
  {
    name: "an image link that is not http(s)",
    body: image({ link: "ftp://example.com/a.jpg" }),
    fields: ["image.link"]
  },
  {
    name: "a caption over 1024 characters",
    body: image({ id: "1", caption: "c".repeat(1025) }),
    fields: ["image.caption"]
  },
  {
    name: "an audio caption",
    body: { to: "16505551234", type: "audio", audio: { id: "1", caption: "no" } },
    fields: ["audio.caption"]
  },
  {
    name: "an audio with link and id",
    body: { to: "16505551234", type: "audio", audio: { id: "1", link: "https://e.com/a.ogg" } },
    fields: ["audio"]
  },
  {
    name: "a sticker caption",
    body: { to: "16505551234", type: "sticker", sticker: { id: "1", caption: "no" } },
    fields: ["sticker.caption"]
  },
  {
    name: "a latitude out of range",
    body: { to: "16505551234", type: "location", location: { latitude: 91, longitude: 0 } },
    fields: ["location.latitude"]
  },
  { name: "no contacts", body: { to: "16505551234", type: "contacts", contacts: [] }, fields: ["contacts"] },
  {
    name: "a contact without formatted_name",
    body: { to: "16505551234", type: "contacts", contacts: [{ name: { first_name: "Ann" } }] },
    fields: ["contacts.0.name.formatted_name"]
  },
  {
    name: "a reaction without message_id",
    body: { to: "16505551234", type: "reaction", reaction: { emoji: "x" } },
    fields: ["reaction.message_id"]
  },
  {
    name: "a template with a bad language code and no name",
    body: { to: "16505551234", type: "template", template: { language: { code: "english" } } },
    fields: ["template.name", "template.language.code"]
  },
  {
    name: "a template button without sub_type and index",
    body: {
      to: "16505551234",
      type: "template",
      template: {
        name: "t",
        language: { code: "en" },
        components: [{ type: "button", parameters: [{ type: "text", text: "x" }] }]
      }
    },
    fields: ["template.components.0.sub_type", "template.components.0.index"]
  },
  {
    name: "a template image parameter without link or id",
    body: {
      to: "16505551234",
      type: "template",
      template: {
        name: "t",
        language: { code: "pt_BR" },
        components: [{ type: "header", parameters: [{ type: "image", image: {} }] }]
      }
    },
    fields: ["template.components.0.parameters.0.image"]
  },
  {
    name: "a product_list without header and with an empty section",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "product_list",
        body: { text: "b" },
        action: { catalog_id: "1", sections: [{ title: "S", product_items: [] }] }
      }
    },
    fields: ["interactive.header", "interactive.action.sections.0.product_items"]
  },
  {
    name: "a product_list without sections",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "product_list",
        header: { type: "text", text: "h" },
        body: { text: "b" },
        action: { catalog_id: "1", sections: [] }
      }
    },
    fields: ["interactive.action.sections"]
  },
  {
    name: "a product without product_retailer_id",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: { type: "product", body: { text: "b" }, action: { catalog_id: "1" } }
    },
    fields: ["interactive.action.product_retailer_id"]
  },
  {
    name: "a catalog_message with another action name",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "catalog_message",
        body: { text: "b" },
        action: { name: "catalog", parameters: { thumbnail_product_retailer_id: "x" } }
      }
    },
    fields: ["interactive.action.name"]
  },
  {
    name: "four reply buttons",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "button",
        body: { text: "Pick one" },
        action: { buttons: [1, 2, 3, 4].map((n) => ({ type: "reply", reply: { id: `b${n}`, title: `B${n}` } })) }
      }
    },
    fields: ["interactive.action.buttons"]
  },
  {
    name: "a reply button without its title",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "button",
        body: { text: "Pick one" },
        action: { buttons: [{ type: "reply", reply: { id: "b1", title: "" } }] }
      }
    },
    fields: ["interactive.action.buttons.0.reply.title"]
  },
  {
    name: "a list without its button, with a row title over 24 characters",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "list",
        body: { text: "Choose" },
        action: { sections: [{ title: "S", rows: [{ id: "r1", title: "t".repeat(25) }] }] }
      }
    },
    fields: ["interactive.action.button", "interactive.action.sections.0.rows.0.title"]
  },
  {
    name: "a flow named both by id and by name",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "flow",
        body: { text: "Sign up" },
        action: {
          name: "flow",
          parameters: { flow_message_version: "3", flow_cta: "Open", flow_id: "1", flow_name: "signup" }
        }
      }
    },
    fields: ["interactive.action.parameters"]
  },
  {
    name: "an image header without its image",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "call_permission_request",
        header: { type: "image" },
        body: { text: "May we call?" },
        action: { name: "call_permission_request" }
      }
    },
    fields: ["interactive.header.image"]
  },
  {
    name: "order details without reference_id, with another action name",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "order_details",
        body: { text: "Your order" },
        action: {
          name: "review",
          parameters: {
            type: "digital-goods",
            currency: "INR",
            total_amount: { value: 1100, offset: 100 },
            order: {
              status: "pending",
              items: [{ name: "bread", quantity: 1, amount: { value: 1000, offset: 100 } }],
              subtotal: { value: 1000, offset: 100 }
            }
          }
        }
      }
    },
    fields: ["interactive.action.name", "interactive.action.parameters.reference_id"]
  },
  {
    name: "an order status without the order's status",
    body: {
      to: "16505551234",
      type: "interactive",
      interactive: {
        type: "order_status",
        body: { text: "Update" },
        action: { name: "review_order", parameters: { reference_id: "r-1", order: {} } }
      }
    },
    fields: ["interactive.action.parameters.order.status"]
  },
  {
    name: "an unknown interactive kind",
    body: { to: "16505551234", type: "interactive", interactive: { type: "carousel_x" } },
    fields: ["interactive.type"]
  },
  { name: "a context without message_id", body: text({ context: {} }), fields: ["context.message_id"] },
  { name: "another messaging_product", body: text({ messaging_product: "sms" }), fields: ["messaging_product"] },
  { name: "another recipient_type", body: text({ recipient_type: "broadcast" }), fields: ["recipient_type"] },
  { name: "a number as a group", body: text({ recipient_type: "group" }), fields: ["to"] },
  { name: "a group id to an individual", body: text({ to: "120363394320896415@g.us" }), fields: ["to"] },
  { name: "a bare number as a Cloud API group id", body: text({ recipient_type: "group", to: "abc" }), fields: ["to"] },
  { name: "a body that is not an object", body: "send hi to 16505551234", fields: ["body"] },
  {
    name: "several bad fields at once",
    body: { to: "x", type: "text", text: { body: "" }, context: {} },
    fields: ["to", "text.body", "context.message_id"]
  }
]

// Raw: bodies invalid on purpose, which the typed client would refuse to encode, and JSON that is not JSON.
layer(testHubOnFakeGraph())("POST /api/messages validation (raw bodies)", (it) => {
  for (const invalid of invalidCases) {
    it.effect(`refuses ${invalid.name} with a 400 naming the field; nothing is sent or recorded`, () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const refused = yield* sendMessage(tenant.instanceToken, invalid.body)
        expect(refused.status).toBe(400)
        expect(refused.body.error).toBe("validation_failed")
        expect([...fieldsOf(refused.body)].sort()).toEqual([...invalid.fields].sort())
        for (const field of invalid.fields) expect(String(refused.body.message)).toContain(`${field}:`)
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(0)
        expect((yield* historyOf(tenant.instanceToken)).total).toBe(0)
      }))
  }

  it.effect("refuses malformed JSON with a 400", () =>
    Effect.gen(function*() {
      const hub = yield* TestHub
      const tenant = yield* seedTenant()
      const refused = yield* hub.request("POST", "/api/messages", {
        token: tenant.instanceToken,
        body: "{\"to\": \"16505551234\",",
        headers: { "content-type": "application/json" }
      })
      expect(refused.status).toBe(400)
      expect(refused.body).toEqual({
        statusCode: 400,
        message: "Malformed request body: it is not valid JSON",
        error: "malformed_body"
      })
      expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(0)
    }))
})

for (const engine of engines) {
  layer(testHubOnFakeGraph({ engine, graphTimeout: Duration.seconds(1) }))(`Idempotency-Key (${engine})`, (it) => {
    const body = { ...individualMessage, to: "16505551234", type: "text", text: { body: "only once" } } as const

    it.effect("the same key and body return the first answer, marked replayed, and send nothing more", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const first = yield* sendTypedAnswering(tenant.instanceToken, body, "order-1001")
        expect(first.replayed).toBeUndefined()
        const again = yield* sendTypedAnswering(tenant.instanceToken, body, "order-1001")
        expect(again.answer).toEqual(first.answer)
        expect(again.replayed).toBe("true")
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
        expect((yield* historyOf(tenant.instanceToken)).total).toBe(1)
      }))

    it.effect("the same key with another body is a 409 and sends nothing", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        yield* sendTyped(tenant.instanceToken, body, "k-2")
        const conflict = yield* refusedWith(
          sendTyped(tenant.instanceToken, { ...body, text: { body: "something else" } }, "k-2"),
          "Conflict"
        )
        expect(errorBody(conflict)).toMatchObject({ statusCode: 409, error: "idempotency_key_reused" })
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("keys are scoped per instance: another organization's, or another instance of the same organization, never collide", () =>
      Effect.gen(function*() {
        const tenant = yield* seedTenant()
        const other = yield* seedTenant()
        const sibling = yield* addInstance(tenant)
        yield* sendTyped(tenant.instanceToken, body, "shared-key")
        expect((yield* sendTypedAnswering(other.instanceToken, body, "shared-key")).replayed).toBeUndefined()
        // The same organization's other number, with the same key and another body: sent, not a 409.
        const fromSibling = yield* sendTypedAnswering(
          sibling.instanceToken,
          { ...body, text: { body: "from the sibling" } },
          "shared-key"
        )
        expect(fromSibling.replayed).toBeUndefined()
        // Through the organization token too, naming each number.
        yield* sendTyped(tenant.orgToken, { ...body, phone_number_id: sibling.phoneNumberId }, "org-key")
        const viaOrg = yield* sendTypedAnswering(
          tenant.orgToken,
          { ...body, phone_number_id: tenant.phoneNumberId },
          "org-key"
        )
        expect(viaOrg.replayed).toBeUndefined()
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(2)
        expect(yield* sendsTo(other.phoneNumberId)).toHaveLength(1)
        expect(yield* sendsTo(sibling.phoneNumberId)).toHaveLength(2)
      }))

    it.effect("an upstream refusal is replayed as it was, without calling the upstream again", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
          status: 400,
          body: {
            error: { message: "(#131030) Recipient phone number not in allowed list", code: 131030, fbtrace_id: "R1" }
          }
        })
        const first = yield* refusedWith(sendTyped(tenant.instanceToken, body, "refused-1"), "UpstreamFailure")
        expect(first.status).toBe(400)
        const again = yield* refusedWith(sendTyped(tenant.instanceToken, body, "refused-1"), "UpstreamFailure")
        expect(errorBody(again)).toEqual(errorBody(first))
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a throttled send releases its key, so the retry is sent", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, {
          status: 429,
          body: { error: { message: "(#130429) Rate limit hit", code: 130429 } },
          headers: { "retry-after": "2" }
        })
        yield* refusedWith(sendTyped(tenant.instanceToken, body, "throttled-1"), "TooManyRequests")
        const retry = yield* sendTypedAnswering(tenant.instanceToken, body, "throttled-1")
        expect(retry.replayed).toBeUndefined()
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(2)
      }))

    it.effect("a repeat while the first is in flight is a 409; a send with unknown outcome is then replayed, not re-sent", () =>
      Effect.gen(function*() {
        const fake = yield* FakeGraph
        const tenant = yield* seedTenant()
        yield* fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, { hang: true })
        const first = yield* Effect.fork(
          refusedWith(sendTyped(tenant.instanceToken, body, "slow-1"), "UpstreamFailure")
        )
        yield* untilSendsReach(tenant.phoneNumberId, 1)
        const concurrent = yield* refusedWith(sendTyped(tenant.instanceToken, body, "slow-1"), "Conflict")
        expect(concurrent.error).toBe("idempotency_key_in_flight")
        const timedOut = yield* Fiber.join(first)
        expect(timedOut.status).toBe(504)
        const replayed = yield* refusedWith(sendTyped(tenant.instanceToken, body, "slow-1"), "UpstreamFailure")
        expect(errorBody(replayed)).toEqual(errorBody(timedOut))
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
      }))

    it.effect("a key older than 24 hours is forgotten: the same key sends again", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const tenant = yield* seedTenant()
        yield* sql`INSERT INTO idempotency_keys ${
          sql.insert({
            organization_id: tenant.organizationId,
            idempotency_key: "old-key",
            instance_id: tenant.instanceId,
            request_hash: "0".repeat(64),
            status_code: 200,
            response: JSON.stringify({ messaging_product: "whatsapp", contacts: [], messages: [{ id: "wamid.old" }] }),
            created_at: new Date(Date.now() - 25 * 3_600_000).toISOString()
          })
        }`
        const sent = yield* sendTyped(tenant.instanceToken, body, "old-key")
        expect(sent.messages[0]?.id).not.toBe("wamid.old")
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
        const again = yield* sendTyped(tenant.instanceToken, body, "old-key")
        expect(again).toEqual(sent)
        expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
      }))

    // Raw: a body written otherwise (keys in another order, a "+" number), which the typed client always
    // writes its one way; and keys it would refuse to encode.
    describe("on the wire", () => {
      it.effect("the same body written otherwise (keys in another order, the number with its \"+\") is the same request", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          const first = yield* sendMessage(
            tenant.instanceToken,
            { to: "16505551234", type: "text", text: { body: "only once" } },
            { "idempotency-key": "order-1002" }
          )
          expect(first.status).toBe(200)
          const again = yield* sendMessage(tenant.instanceToken, {
            text: { body: "only once" },
            type: "text",
            to: "+16505551234"
          }, {
            "idempotency-key": "order-1002"
          })
          expect(again.status).toBe(200)
          expect(again.body).toEqual(first.body)
          expect(again.headers.get("idempotent-replayed")).toBe("true")
          expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
        }))

      it.effect("refuses a key that is empty, too long or not visible ASCII", () =>
        Effect.gen(function*() {
          const tenant = yield* seedTenant()
          for (const key of ["k".repeat(256), "has space", "clé"]) {
            const refused = yield* sendMessage(tenant.instanceToken, body, { "idempotency-key": key })
            expect(refused.status).toBe(400)
            expect(fieldsOf(refused.body)).toEqual(["idempotency-key"])
          }
          expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(0)
        }))
    })
  })
}

layer(testHubOnFakeGraph({ sendRateCap: 2 }))("pacing per phone number", (it) => {
  it.effect("over the rate the hub answers 429 with Retry-After and does not call the upstream", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const other = yield* seedTenant()
      const body = { ...individualMessage, to: "16505551234", type: "text", text: { body: "burst" } } as const
      yield* sendTyped(tenant.instanceToken, body)
      yield* sendTyped(tenant.instanceToken, body)
      // Raw: the Retry-After header, which a typed refusal does not carry.
      const paced = yield* sendMessage(tenant.instanceToken, body)
      expect(paced.status).toBe(429)
      expect(paced.headers.get("retry-after")).toBe("1")
      expect(paced.body).toMatchObject({ statusCode: 429, error: "rate_limited" })
      expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(2)
      expect((yield* historyOf(tenant.instanceToken)).total).toBe(2)

      // Another number has its own budget.
      yield* sendTyped(other.instanceToken, body)

      // The hub runs on the test clock: half a second frees one send, not two.
      yield* TestClock.adjust(Duration.millis(500))
      yield* sendTyped(tenant.instanceToken, body)
      const pacedAgain = yield* refusedWith(sendTyped(tenant.instanceToken, body), "TooManyRequests")
      expect(pacedAgain.error).toBe("rate_limited")
      expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(3)
    }))
})

// On PostgreSQL the budget is the fleet's, kept by the database's clock (Messages/SharedPacing.ts),
// which the test clock does not move: at 1 a second a second send at once is refused, however slow the run.
layer(testHubOnFakeGraph({ sendRateCap: 1, engine: "postgres" }))("pacing per phone number (postgres)", (it) => {
  it.effect("over the rate the hub answers 429 with Retry-After and does not call the upstream", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const other = yield* seedTenant()
      const body = { ...individualMessage, to: "16505551234", type: "text", text: { body: "burst" } } as const
      yield* sendTyped(tenant.instanceToken, body)
      const paced = yield* sendMessage(tenant.instanceToken, body)
      expect(paced.status).toBe(429)
      expect(paced.headers.get("retry-after")).toBe("1")
      expect(paced.body).toMatchObject({ statusCode: 429, error: "rate_limited" })
      expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(1)
      expect((yield* historyOf(tenant.instanceToken)).total).toBe(1)
      // Another number has its own budget.
      yield* sendTyped(other.instanceToken, body)
      expect(yield* sendsTo(other.phoneNumberId)).toHaveLength(1)
    }))
})

layer(testHubOnFakeGraph())("recording sends when storage fails", (it) => {
  // SQLite triggers stand in for a failing database, for the one statement under test.
  it.effect("if the pending record cannot be written, nothing is sent and the answer is 503", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const tenant = yield* seedTenant()
      yield* sql`CREATE TRIGGER refuse_message_insert BEFORE INSERT ON messages BEGIN SELECT RAISE(ABORT, 'disk full'); END`
      // Raw: the typed client decodes every 503 of a send as the upstream's (UpstreamFailure, status 503), the
      // hub's own storage_unavailable included (Wire.UpstreamUnavailable takes any 503 body): the wire tells them apart.
      const sent = yield* sendMessage(tenant.instanceToken, hi).pipe(
        Effect.ensuring(Effect.orDie(sql`DROP TRIGGER refuse_message_insert`))
      )
      expect(sent.status).toBe(503)
      expect(sent.body).toMatchObject({ statusCode: 503, error: "storage_unavailable" })
      expect(yield* sendsTo(tenant.phoneNumberId)).toHaveLength(0)
    }))

  // A statement refused for its own fault (a trigger here) is not retried: the record stays pending. A
  // database gone or full is another matter: the record gets the id once it is back (database-outage.test.ts).
  it.effect("if the acceptance is refused as a statement, the send still answers 200 and its record stays pending", () =>
    Effect.gen(function*() {
      const tenant = yield* seedTenant()
      const sent = yield* whileAcceptanceRefused(sendTyped(tenant.instanceToken, hi))
      expect(sent.messages[0]?.id).toMatch(/^wamid\./)
      const listed = yield* historyOf(tenant.instanceToken)
      expect(listed.data).toEqual([
        expect.objectContaining({ status: "pending", waMessageId: null, to: "16505551234" })
      ])
    }))
})
describe("stopping the hub", () => {
  // Live services: the hub is built and stopped by the test itself, on a database file that outlives it.
  plain.live(
    "waits for the sends in flight: one the upstream answers while the hub stops is answered and recorded accepted",
    () =>
      Effect.gen(function*() {
        const folder = mkdtempSync(join(tmpdir(), "hub-stop-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
        const databaseFile = join(folder, "hub.sqlite")
        const stopping = yield* Deferred.make<void>()
        const watch = Logger.make(({ message }) => {
          if (JSON.stringify(message).includes("Waiting for the sends in flight")) {
            Effect.runSync(Deferred.succeed(stopping, undefined))
          }
        })
        let release = () => {}
        const released = new Promise<void>((resolve) => {
          release = resolve
        })
        const hubScope = yield* Scope.make()
        const hub = yield* Layer.buildWithScope(
          testHubOnFakeGraph({ databaseFile }, Logger.replace(Logger.defaultLogger, watch)),
          hubScope
        )
        const tenant = yield* Effect.provide(seedTenant(), hub)
        // The first send fills the token and target caches, so the second is the fast lane's plain send.
        yield* Effect.provide(sendTyped(tenant.instanceToken, hi), hub)
        const heldAnswer = {
          messaging_product: "whatsapp",
          contacts: [{ input: RECIPIENT, wa_id: RECIPIENT }],
          messages: [{ id: "wamid.held" }]
        }
        yield* Effect.provide(
          Effect.flatMap(
            FakeGraph,
            (fake) => fake.respond({ path: `/${tenant.phoneNumberId}/messages` }, { body: heldAnswer, after: released })
          ),
          hub
        )
        const held = yield* Effect.fork(Effect.provide(sendTyped(tenant.instanceToken, hi), hub))
        yield* Effect.provide(untilSendsReach(tenant.phoneNumberId, 2), hub)

        const closing = yield* Effect.fork(Scope.close(hubScope, Exit.void))
        yield* Deferred.await(stopping)
        release()
        const answered = yield* Fiber.join(held)
        yield* Fiber.join(closing)
        expect(answered).toEqual(heldAnswer)

        const records = yield* Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<
            { readonly status: string; readonly wa_message_id: string | null }
          >`SELECT status, wa_message_id FROM messages ORDER BY created_at, id`).pipe(
            Effect.provide(sqliteLayer(databaseFile)),
            Effect.orDie
          )
        expect(records).toHaveLength(2)
        expect(records[1]).toEqual({ status: "pending", wa_message_id: "wamid.held" })
      }).pipe(Effect.scoped)
  )
})

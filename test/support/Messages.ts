/** Helpers shared by the messaging suites: sending, listing, and waiting for the fake upstream. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { HubClient } from "../../src/Client.js"
import type { SendMessageRequest } from "../../src/Messages/MessageSchemas.js"
import { FakeGraph, type RecordedRequest } from "./FakeGraph.js"
import { untilSignalledThat } from "./Signals.js"
import { itemsOf, TestHub } from "./TestHub.js"
import { messagesFirstPage, sentNow } from "./TypedRequests.js"

type SendRequest = Parameters<HubClient["messages"]["send"]>[0]

/** A typed send's payload: the message as a program gives it (its defaults spelled out, see TypedRequests.ts). */
export type SendPayload = SendRequest["payload"]

type ListParams = Parameters<HubClient["messages"]["list"]>[0]["urlParams"]

const typedClient = (token: string) => Effect.flatMap(TestHub, (hub) => hub.client(token))

/** POST /api/messages through the typed client, with an Idempotency-Key when given: the answer, or the typed refusal. */
export const sendTyped = (token: string, payload: SendPayload, idempotencyKey?: string) =>
  sentNow(Effect.map(sendTypedAnswering(token, payload, idempotencyKey), ({ answer }) => answer))

/** A typed send, with the answer's Idempotent-Replayed header (undefined when absent). */
export const sendTypedAnswering = (token: string, payload: SendPayload, idempotencyKey?: string) =>
  Effect.flatMap(typedClient(token), (client) =>
    Effect.map(
      client.messages.send(
        // The client's request type is one object type per payload member (it distributes over the union),
        // which a payload typed as the whole union is not checked against member by member: hence the assertion.
        {
          payload,
          headers: idempotencyKey === undefined ? {} : { "idempotency-key": idempotencyKey },
          withResponse: true
        } as SendRequest & { readonly withResponse: true }
      ),
      ([answer, response]) => ({ answer, replayed: response.headers["idempotent-replayed"] })
    ))

/** GET /api/messages through the typed client: page 1 of 50 unless `params` say otherwise. */
export const historyOf = (token: string, params: Partial<ListParams> = {}) =>
  Effect.flatMap(
    typedClient(token),
    (client) => client.messages.list({ urlParams: { ...messagesFirstPage, ...params } })
  )

/** A raw send: for tests of the wire (bodies the typed client cannot write, headers it cannot show). */
export const sendMessage = (token: string, json: unknown, headers?: Record<string, string>) =>
  Effect.flatMap(
    TestHub,
    (hub) => hub.request("POST", "/api/messages", { token, json, ...(headers === undefined ? {} : { headers }) })
  )

/** Runs `effect` while the database refuses to record a send's acceptance (a trigger stands in for a full disk). */
export const whileAcceptanceRefused = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.zipRight(
      Effect.orDie(
        sql`CREATE TRIGGER refuse_acceptance BEFORE UPDATE OF wa_message_id ON messages BEGIN SELECT RAISE(ABORT, 'disk full'); END`
      ),
      Effect.ensuring(effect, Effect.orDie(sql`DROP TRIGGER refuse_acceptance`))
    ))

export const listMessages = (token: string, query = "") =>
  Effect.flatMap(TestHub, (hub) => hub.request("GET", `/api/messages${query === "" ? "" : `?${query}`}`, { token }))

/** The send requests the fake received for one phone number (each test uses its own tenant). */
export const sendsTo = (phoneNumberId: string): Effect.Effect<ReadonlyArray<RecordedRequest>, never, FakeGraph> =>
  Effect.map(
    Effect.flatMap(FakeGraph, (fake) => fake.requests),
    (requests) => requests.filter((r) => r.method === "POST" && r.path === `/v23.0/${phoneNumberId}/messages`)
  )

/**
 * Waits until the fake has received `count` sends for the number, looking as each request arrives
 * (a deadline in real time: the hub runs on the TestClock): the signal that the hub is now waiting on the upstream.
 */
export const untilSendsReach = (phoneNumberId: string, count: number) =>
  Effect.flatMap(
    FakeGraph,
    (fake) =>
      Effect.asVoid(
        untilSignalledThat(
          fake.received,
          `${count} send(s) for ${phoneNumberId} at the fake upstream`,
          sendsTo(phoneNumberId),
          (sends) => sends.length >= count,
          "5 seconds"
        )
      )
  )

/** The `details[].field` names of a validation answer. */
export const fieldsOf = (body: Readonly<Record<string, unknown>>): ReadonlyArray<string> =>
  itemsOf(body, "details").map((d) => String(d.field))

/** The first upstream message id of a send answer. */
export const waIdOf = (body: Readonly<Record<string, unknown>>): string => String(itemsOf(body, "messages")[0]?.id)

/** An upstream message id in the real format, for replies and reactions. */
const WAMID = "wamid.HBgLMTY1MDUwNzY1MjAVAgASGBQzQTk5RkM3"

/** A message's content: a send without its addressing and the hub's own fields (one member per type). */
type Content<M> = M extends unknown
  ? Omit<M, "messaging_product" | "recipient_type" | "to" | "recipient" | "phone_number_id" | "via" | "forwarded">
  : never

type MessageContent = Content<SendMessageRequest>

/** One send of every message type: its content, which the upstream must receive as it is (beside the addressing). */
export interface TypeCase {
  readonly name: string
  /** The request body without messaging_product, recipient_type and to (typed, so the typed client can send it). */
  readonly request: MessageContent
}

const templateRequest: MessageContent = {
  type: "template",
  template: {
    name: "order_update",
    language: { code: "en_US" },
    components: [
      { type: "header", parameters: [{ type: "image", image: { link: "https://example.com/h.jpg" } }] },
      {
        type: "body",
        parameters: [
          { type: "text", text: "Mark" },
          { type: "currency", currency: { fallback_value: "$100.99", code: "USD", amount_1000: 100990 } }
        ]
      },
      { type: "button", sub_type: "quick_reply", index: 0, parameters: [{ type: "payload", payload: "STOP_UPDATES" }] },
      { type: "button", sub_type: "url", index: "1", parameters: [{ type: "text", text: "order/860198" }] }
    ]
  }
}

export const typeCases: ReadonlyArray<TypeCase> = [
  { name: "text", request: { type: "text", text: { body: "Yes, it comes in blue.", preview_url: false } } },
  {
    name: "image by link",
    request: { type: "image", image: { link: "https://example.com/p.jpg", caption: "Blue variant" } }
  },
  { name: "image by id", request: { type: "image", image: { id: "1037543291543636" } } },
  { name: "audio", request: { type: "audio", audio: { id: "1037543291543636" } } },
  { name: "video", request: { type: "video", video: { link: "https://example.com/v.mp4", caption: "How it works" } } },
  {
    name: "document",
    request: {
      type: "document",
      document: { id: "1037543291543636", filename: "invoice.pdf", caption: "Your invoice" }
    }
  },
  { name: "sticker", request: { type: "sticker", sticker: { id: "798882015472548" } } },
  {
    name: "location",
    // A coordinate written as a string (as Meta's examples do) is the wire's matter: messages.test.ts sends one raw.
    request: {
      type: "location",
      location: { latitude: 37.44216, longitude: -122.16153, name: "Philz Coffee", address: "101 Forest Ave" }
    }
  },
  {
    name: "contacts",
    request: {
      type: "contacts",
      contacts: [{
        name: { formatted_name: "Barbara J. Johnson", first_name: "Barbara", last_name: "Johnson" },
        phones: [{ phone: "+1 (940) 555-1234", type: "HOME", wa_id: "19405551234" }],
        emails: [{ email: "bjohnson@example.com", type: "WORK" }],
        org: { company: "Lucky Shrub", title: "Manager" }
      }]
    }
  },
  { name: "reaction", request: { type: "reaction", reaction: { message_id: WAMID, emoji: "\u{1F44D}" } } },
  // The button index goes as given (a number or a string): the upstream takes both.
  { name: "template with header image, body text and url button", request: templateRequest },
  {
    name: "interactive product",
    request: {
      type: "interactive",
      interactive: {
        type: "product",
        body: { text: "Check this out" },
        footer: { text: "Lucky Shrub" },
        action: { catalog_id: "194836987003835", product_retailer_id: "di9ozbzfi4" }
      }
    }
  },
  {
    name: "interactive product_list",
    request: {
      type: "interactive",
      interactive: {
        type: "product_list",
        header: { type: "text", text: "Summer picks" },
        body: { text: "Our best sellers" },
        action: {
          catalog_id: "194836987003835",
          sections: [{
            title: "Succulents",
            product_items: [{ product_retailer_id: "di9ozbzfi4" }, { product_retailer_id: "nqryix03ez" }]
          }]
        }
      }
    }
  },
  {
    name: "interactive catalog_message",
    request: {
      type: "interactive",
      interactive: {
        type: "catalog_message",
        body: { text: "Browse our catalog" },
        action: { name: "catalog_message", parameters: { thumbnail_product_retailer_id: "di9ozbzfi4" } }
      }
    }
  },
  {
    name: "interactive reply buttons (passed through)",
    request: {
      type: "interactive",
      interactive: {
        type: "button",
        body: { text: "Confirm?" },
        action: {
          buttons: [{ type: "reply", reply: { id: "yes", title: "Yes" } }, {
            type: "reply",
            reply: { id: "no", title: "No" }
          }]
        }
      }
    }
  },
  {
    name: "a reply with context",
    request: { type: "text", context: { message_id: WAMID }, text: { body: "Replying to you" } }
  }
]

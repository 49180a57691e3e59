/**
 * Upstream webhook payloads for tests. The inbound messages are Meta's own examples from the
 * `/whatsapp/webhooks` pseudo-path of its Business Messaging OpenAPI file (v23.0, MIT licensed);
 * status changes follow the payloads in research §4. Only the routing ids are replaced per test.
 */
import { createHmac } from "node:crypto"

export interface BusinessNumber {
  readonly phoneNumberId: string
  readonly wabaId: string
}

type Json = string | number | boolean | null | { readonly [key: string]: Json } | ReadonlyArray<Json>
export type JsonObject = { readonly [key: string]: Json }

/** Meta's inbound message examples, each with a distinct message id. */
export const META_MESSAGES = {
  text: {
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
    timestamp: "1749416383",
    type: "text",
    text: { body: "Does it come in another color?" }
  },
  location: {
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTU2MjZEMDBGRkE3MENEMDE0RQA=",
    timestamp: "1744344496",
    location: {
      address: "101 Forest Ave, Palo Alto, CA 94301",
      latitude: 37.44221496582,
      longitude: -122.16165924072,
      name: "Philz Coffee",
      url: "https://philzcoffee.com/"
    },
    type: "location"
  },
  button: {
    context: { from: "15550783881", id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJFNjk2OTMwNEZCQjhGMzUyQUYA" },
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUU0M0MxQzQzMUJCMTMwNUZFOQA=",
    timestamp: "1750091045",
    type: "button",
    button: { payload: "Unsubscribe", text: "Unsubscribe" }
  },
  listReply: {
    context: { from: "15550783881", id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJGMzEyNzhENTZDMzNGODlDRDgA" },
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUJDQ0NDM0FEODY4ODkzOTc5RgA=",
    timestamp: "1749854575",
    type: "interactive",
    interactive: {
      type: "list_reply",
      list_reply: { id: "priority_express", title: "Priority Mail Express", description: "Next Day to 2 Days" }
    }
  },
  buttonReply: {
    context: { from: "15550783881", id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MEM2RUJFNkI0RENGQTVDRjUA" },
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTZBQzg0MzQ4QjRCM0NGNkVGOAA=",
    timestamp: "1750025136",
    type: "interactive",
    interactive: { type: "button_reply", button_reply: { id: "cancel-button", title: "Cancel" } }
  },
  order: {
    from: "16505551234",
    id: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTEyQjFGNzI1QTQxMjI5QTMyOQA=",
    timestamp: "1750096325",
    type: "order",
    order: {
      catalog_id: "194836987003835",
      text: "",
      product_items: [
        { product_retailer_id: "di9ozbzfi4", quantity: 2, item_price: 30, currency: "USD" },
        { product_retailer_id: "nqryix03ez", quantity: 1, item_price: 25, currency: "USD" }
      ]
    }
  }
} as const satisfies Record<string, JsonObject>

const metadata = (number: BusinessNumber) => ({
  display_phone_number: "15550783881",
  phone_number_id: number.phoneNumberId
})

/** A `messages` change carrying inbound messages to a number. */
export const inboundChange = (number: BusinessNumber, ...messages: ReadonlyArray<JsonObject>): JsonObject => ({
  field: "messages",
  value: {
    messaging_product: "whatsapp",
    metadata: metadata(number),
    contacts: [{ profile: { name: "Sheena Nelson" }, wa_id: "16505551234" }],
    messages
  }
})

export const status = (id: string, state: string, timestamp: number, extra: JsonObject = {}): JsonObject => ({
  id,
  status: state,
  timestamp: String(timestamp),
  recipient_id: "16505551234",
  ...(state === "failed"
    ? {}
    : { pricing: { billable: true, pricing_model: "PMP", category: "utility", type: "regular" } }),
  ...extra
})

/** A `messages` change carrying status updates of messages sent from a number. */
export const statusChange = (number: BusinessNumber, ...statuses: ReadonlyArray<JsonObject>): JsonObject => ({
  field: "messages",
  value: { messaging_product: "whatsapp", metadata: metadata(number), statuses }
})

/** The upstream envelope; entries are `[wabaId, changes]`. */
export const envelope = (...entries: ReadonlyArray<readonly [string, ReadonlyArray<JsonObject>]>): JsonObject => ({
  object: "whatsapp_business_account",
  entry: entries.map(([id, changes]) => ({ id, changes }))
})

/** The upstream's X-Hub-Signature-256 for a body. */
export const signBody = (appSecret: string, body: string) =>
  `sha256=${createHmac("sha256", appSecret).update(body).digest("hex")}`

let wamidCounter = 0
/** A fresh upstream message id. */
export const wamid = () =>
  `wamid.TEST${Date.now().toString(36)}${(++wamidCounter).toString(36)}${Math.random().toString(36).slice(2, 8)}`

/**
 * The `interactive` object of a send: every kind of Meta's Business Messaging API document (v23.0),
 * one union member per kind, each checked on the shape that document gives it:
 * - the interface's kinds (product, product_list, catalog_message), field by field as the interface says;
 * - button, list, flow and call_permission_request, on the document's schema (InteractiveObject);
 * - order_details and order_status, on the document's examples (their action names and parameters);
 * - the upstream's other kinds (cta_url, location_request_message, address_message, voice_call)
 *   once they have a body text and an action.
 * The document's kinds keep the fields it does not name (they pass through to the upstream).
 */
import { Schema } from "effect"
import { JsonObjectSchema, OtherKeys } from "../Domain/Json.js"
import { HttpUrl, MediaId, NonEmpty, optional } from "./Content.js"

const TextBlock = (max: number) => Schema.Struct({ text: NonEmpty(max) })
const RetailerId = NonEmpty(100)
const CatalogId = NonEmpty(100)

/** A body text of the document's kinds (at most 1024 characters); other fields pass through. */
const Body = Schema.Struct({ text: NonEmpty(1024) }, OtherKeys)
const Footer = Schema.Struct({ text: NonEmpty(60) }, OtherKeys)

/** A header's media: a link or an uploaded media id. */
const HeaderMedia = Schema.Struct({ link: optional(HttpUrl), id: optional(MediaId) }, OtherKeys).pipe(
  Schema.filter((media) =>
    (media.link === undefined) !== (media.id === undefined) || "needs link (a public http(s) URL) or id, not both"
  )
)

/** The document's HeaderObject: a text, or the media object named like its type. */
const Header = Schema.Struct(
  {
    type: Schema.Literal("text", "image", "video", "document").annotations({
      message: () => ({ message: "must be one of text, image, video, document", override: true })
    }),
    text: optional(NonEmpty(60)),
    sub_text: optional(NonEmpty(60)),
    image: optional(HeaderMedia),
    video: optional(HeaderMedia),
    document: optional(HeaderMedia)
  },
  OtherKeys
).pipe(
  Schema.filter((header) =>
    header[header.type] !== undefined ||
    { path: [header.type], message: `is required when header.type is ${header.type}` }
  )
)

const Product = Schema.Struct({
  type: Schema.Literal("product"),
  body: TextBlock(1024),
  footer: optional(TextBlock(60)),
  action: Schema.Struct({ catalog_id: CatalogId, product_retailer_id: RetailerId })
})

const Section = Schema.Struct({
  title: NonEmpty(24),
  product_items: Schema.Array(Schema.Struct({ product_retailer_id: RetailerId })).pipe(
    Schema.minItems(1, { message: () => "must hold at least one product" })
  )
})

const ProductList = Schema.Struct({
  type: Schema.Literal("product_list"),
  header: Schema.Struct({ type: Schema.Literal("text"), text: NonEmpty(60) }),
  body: TextBlock(1024),
  footer: optional(TextBlock(60)),
  action: Schema.Struct({
    catalog_id: CatalogId,
    sections: Schema.Array(Section).pipe(
      Schema.minItems(1, { message: () => "must hold at least one section" }),
      Schema.maxItems(10, { message: () => "must hold at most 10 sections" })
    )
  })
})

const CatalogMessage = Schema.Struct({
  type: Schema.Literal("catalog_message"),
  body: TextBlock(1024),
  footer: optional(TextBlock(60)),
  action: Schema.Struct({
    name: Schema.Literal("catalog_message"),
    parameters: Schema.Struct({ thumbnail_product_retailer_id: RetailerId })
  })
})

/** The fields every kind of the document shares: a body, and an optional header and footer. */
const framed = { header: optional(Header), body: Body, footer: optional(Footer) }

/** Reply buttons: one to three, each with a unique id and a title. */
const ReplyButtons = Schema.Struct(
  {
    type: Schema.Literal("button"),
    ...framed,
    action: Schema.Struct(
      {
        buttons: Schema.Array(
          Schema.Struct({
            type: Schema.Literal("reply").annotations({
              message: () => ({ message: "must be reply", override: true })
            }),
            reply: Schema.Struct({ id: NonEmpty(256), title: NonEmpty(20) }, OtherKeys)
          }, OtherKeys)
        ).pipe(
          Schema.minItems(1, { message: () => "must hold one to three buttons" }),
          Schema.maxItems(3, { message: () => "must hold one to three buttons" })
        )
      },
      OtherKeys
    )
  },
  OtherKeys
)

const ListRow = Schema.Struct(
  { id: NonEmpty(200), title: NonEmpty(24), description: optional(NonEmpty(72)) },
  OtherKeys
)

/** A list: a button that opens one to ten sections of rows. */
const List = Schema.Struct(
  {
    type: Schema.Literal("list"),
    ...framed,
    action: Schema.Struct(
      {
        button: NonEmpty(20),
        sections: Schema.Array(
          Schema.Struct({
            title: optional(NonEmpty(24)),
            rows: Schema.Array(ListRow).pipe(Schema.maxItems(10, { message: () => "must hold at most 10 rows" }))
          }, OtherKeys)
        ).pipe(
          Schema.minItems(1, { message: () => "must hold at least one section" }),
          Schema.maxItems(10, { message: () => "must hold at most 10 sections" })
        )
      },
      OtherKeys
    )
  },
  OtherKeys
)

/** A flow, named by id or by name (one of the two), with its version and call to action. */
const Flow = Schema.Struct(
  {
    type: Schema.Literal("flow"),
    ...framed,
    action: Schema.Struct(
      {
        name: Schema.Literal("flow").annotations({ message: () => ({ message: "must be flow", override: true }) }),
        parameters: Schema.Struct(
          {
            flow_message_version: Schema.String.pipe(
              Schema.pattern(/^\d+$/, { message: () => "must be the flow message version, such as \"3\"" })
            ),
            flow_cta: NonEmpty(1024),
            flow_id: optional(NonEmpty(100)),
            flow_name: optional(NonEmpty(200)),
            mode: optional(
              Schema.Literal("draft", "published").annotations({
                message: () => ({ message: "must be draft or published", override: true })
              })
            ),
            flow_token: optional(NonEmpty(1024)),
            flow_action: optional(
              Schema.Literal("navigate", "data_exchange").annotations({
                message: () => ({ message: "must be navigate or data_exchange", override: true })
              })
            ),
            flow_action_payload: optional(JsonObjectSchema)
          },
          OtherKeys
        ).pipe(
          Schema.filter((p) =>
            (p.flow_id === undefined) !== (p.flow_name === undefined) || "needs flow_id or flow_name, not both"
          )
        )
      },
      OtherKeys
    )
  },
  OtherKeys
)

/** A request for the user's permission to call them. */
const CallPermissionRequest = Schema.Struct(
  {
    type: Schema.Literal("call_permission_request"),
    ...framed,
    action: Schema.Struct(
      {
        name: Schema.Literal("call_permission_request").annotations({
          message: () => ({ message: "must be call_permission_request", override: true })
        })
      },
      OtherKeys
    )
  },
  OtherKeys
)

/** An amount as the payment messages write it: an integer value and its offset (100 for cents). */
const Amount = Schema.Struct({ value: Schema.Int, offset: Schema.Int }, OtherKeys)

/** An order to review and pay (the document's "Send Order Details Message"). */
const OrderDetails = Schema.Struct(
  {
    type: Schema.Literal("order_details"),
    ...framed,
    action: Schema.Struct(
      {
        name: Schema.Literal("review_and_pay").annotations({
          message: () => ({ message: "must be review_and_pay", override: true })
        }),
        parameters: Schema.Struct(
          {
            reference_id: NonEmpty(256),
            type: NonEmpty(64),
            currency: Schema.String.pipe(
              Schema.pattern(/^[A-Z]{3}$/, { message: () => "must be a currency code such as INR" })
            ),
            total_amount: Amount,
            order: Schema.Struct(
              {
                status: NonEmpty(64),
                items: Schema.Array(
                  Schema.Struct({ name: NonEmpty(256), quantity: Schema.Int, amount: Amount }, OtherKeys)
                ).pipe(
                  Schema.minItems(1, { message: () => "must hold at least one item" })
                ),
                subtotal: Amount
              },
              OtherKeys
            )
          },
          OtherKeys
        )
      },
      OtherKeys
    )
  },
  OtherKeys
)

/** An update of an order's status (the document's "Send Order Status Message"). */
const OrderStatus = Schema.Struct(
  {
    type: Schema.Literal("order_status"),
    ...framed,
    action: Schema.Struct(
      {
        name: Schema.Literal("review_order").annotations({
          message: () => ({ message: "must be review_order", override: true })
        }),
        parameters: Schema.Struct(
          { reference_id: NonEmpty(256), order: Schema.Struct({ status: NonEmpty(64) }, OtherKeys) },
          OtherKeys
        )
      },
      OtherKeys
    )
  },
  OtherKeys
)

const otherKinds = ["cta_url", "location_request_message", "address_message", "voice_call"] as const

/** Other upstream kinds: lightly checked, passed through with all their fields (one member per kind). */
const otherKind = (type: (typeof otherKinds)[number]) =>
  Schema.Struct(
    {
      type: Schema.Literal(type),
      body: Schema.Struct({ text: NonEmpty(4096) }, OtherKeys),
      action: Schema.Struct({}, OtherKeys)
    },
    OtherKeys
  )

export const Interactive = Schema.Union(
  Product,
  ProductList,
  CatalogMessage,
  ReplyButtons,
  List,
  Flow,
  CallPermissionRequest,
  OrderDetails,
  OrderStatus,
  ...otherKinds.map(otherKind)
)

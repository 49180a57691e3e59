/**
 * The `interactive` object of a send. The spec's kinds (product, product_list, catalog_message) are
 * checked field by field; the other upstream kinds (buttons, lists, CTA URL, flows, …) pass through
 * once they have a body text and an action, since customers use them too.
 */
import { Schema } from "effect"
import { OtherKeys } from "../Domain/Json.js"
import { NonEmpty, optional } from "./Content.js"

const TextBlock = (max: number) => Schema.Struct({ text: NonEmpty(max) })
const RetailerId = NonEmpty(100)
const CatalogId = NonEmpty(100)

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

const otherKinds = ["button", "list", "cta_url", "flow", "location_request_message", "address_message", "voice_call"] as const

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

export const Interactive = Schema.Union(Product, ProductList, CatalogMessage, ...otherKinds.map(otherKind))

/**
 * The `template` object of a send: name, language and the components that fill its variables.
 * Text and media parameters are checked; the upstream's other parameter forms (currency, date_time,
 * payload, action, …) are passed through once they carry the object named like their type.
 */
import { Schema } from "effect"
import { OtherKeys } from "../Domain/Json.js"
import { Document, Image, NonEmpty, optional, Video } from "./Content.js"

/** Locale codes as the upstream writes them: `en`, `en_US`, `pt_BR`, `zh_CN`, `fil`. */
const LanguageCode = Schema.String.pipe(
  Schema.pattern(/^[a-z]{2,3}(_[A-Za-z]{2,4})?$/, { message: () => "must be a locale code such as en, en_US or pt_BR" })
)

/**
 * A text parameter. Graph reads a JSON number or boolean as its text (Meta's own example of a quick
 * reply template sends `"text": true`), so those pass through as given.
 */
const TextParameter = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.Union(Schema.String, Schema.Number, Schema.Boolean).annotations({
    message: () => ({ message: "must be the parameter's text", override: true })
  }).pipe(
    Schema.filter((text) =>
      typeof text !== "string" || (text.length >= 1 && text.length <= 32768) || "must be 1 to 32768 characters"
    )
  ),
  parameter_name: optional(NonEmpty(255))
})

const ImageParameter = Schema.Struct({ type: Schema.Literal("image"), image: Image })
const VideoParameter = Schema.Struct({ type: Schema.Literal("video"), video: Video })
const DocumentParameter = Schema.Struct({ type: Schema.Literal("document"), document: Document })

const passThroughTypes = [
  "currency",
  "date_time",
  "payload",
  "action",
  "coupon_code",
  "location",
  "limited_time_offer",
  "tap_target_configuration",
  "order_status",
  "product"
] as const

/** One member per type (not one Literal union), so a parameter is only checked against its own type. */
const passThroughParameter = (type: (typeof passThroughTypes)[number]) =>
  Schema.Struct({ type: Schema.Literal(type) }, OtherKeys).pipe(
    Schema.filter((parameter) => parameter[type] === undefined ? { path: [type], message: "is missing" } : undefined)
  )

const TemplateParameter = Schema.Union(
  TextParameter,
  ImageParameter,
  VideoParameter,
  DocumentParameter,
  ...passThroughTypes.map(passThroughParameter)
)

/** A button's position; the upstream takes a string, callers write a number as often: passed through as given. */
const ButtonIndex = Schema.Union(
  Schema.String.pipe(Schema.pattern(/^\d{1,2}$/)),
  Schema.Int.pipe(Schema.between(0, 99))
).annotations({
  message: () => ({
    message: "must be the button's position: a whole number from 0, as a number or a string",
    override: true
  })
})

export const Component = Schema.Struct({
  type: Schema.Literal("header", "body", "footer", "button"),
  sub_type: optional(
    Schema.String.pipe(
      Schema.pattern(/^[A-Za-z_]{1,40}$/, { message: () => "must be a button kind such as url or quick_reply" })
    )
  ),
  index: optional(ButtonIndex),
  parameters: Schema.Array(TemplateParameter).pipe(
    Schema.minItems(1, { message: () => "must hold at least one parameter" })
  )
}).pipe(
  Schema.filter((component) =>
    component.type !== "button"
      ? undefined
      : [
        component.sub_type === undefined
          ? { path: ["sub_type"], message: "is required on a button component" }
          : undefined,
        component.index === undefined ? { path: ["index"], message: "is required on a button component" } : undefined
      ]
  )
)

export const Template = Schema.Struct({
  name: Schema.String.pipe(
    Schema.pattern(/^[a-z0-9_]{1,512}$/, {
      message: () => "must be the template's exact name (lowercase letters, digits, _)"
    })
  ),
  language: Schema.Struct({ code: LanguageCode, policy: optional(Schema.Literal("deterministic")) }),
  components: optional(Schema.Array(Component))
})

/**
 * The content objects of a send (`text`, `image`, … named like the message `type`), with the
 * upstream's field names. Unknown keys are dropped, except inside contacts, which the upstream
 * defines richly and the hub passes through.
 */
import { Schema } from "effect"
import { OtherKeys } from "../Domain/Json.js"

/** An optional field that, when given, has the schema's type (never `undefined`), so bodies stay JSON. */
export const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

export const NonEmpty = (max: number) =>
  Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(max, { message: () => `must be at most ${max} characters` })
  )

/** A field that must not be there; its message says why. */
export const absent = (why: string) => optional(Schema.Never.annotations({ message: () => why }))

export const HttpUrl = Schema.String.pipe(
  Schema.filter((s) => (/^https?:\/\/\S+$/i.test(s) && URL.canParse(s)) || "must be a public http(s) URL")
)

/** An upstream media id (numeric in practice; kept lenient). */
export const MediaId = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9_.:-]{1,128}$/, { message: () => "must be a media id" })
)

export const Text = Schema.Struct({
  body: NonEmpty(4096),
  preview_url: optional(Schema.Boolean)
})

const Caption = NonEmpty(1024)

const mediaFields = { link: optional(HttpUrl), id: optional(MediaId) }

/** Exactly one of link and id, reported on the media object itself. */
const oneSource = <A extends { readonly link?: string; readonly id?: string }>(media: A) =>
  media.link !== undefined && media.id !== undefined
    ? "give either link or id, not both"
    : media.link === undefined && media.id === undefined
    ? "needs link (a public http(s) URL) or id (an uploaded media id)"
    : undefined

export const Image = Schema.Struct({ ...mediaFields, caption: optional(Caption) }).pipe(
  Schema.filter((media) => oneSource(media))
)
export const Video = Schema.Struct({ ...mediaFields, caption: optional(Caption) }).pipe(
  Schema.filter((media) => oneSource(media))
)
export const Document = Schema.Struct({
  ...mediaFields,
  caption: optional(Caption),
  filename: optional(NonEmpty(240))
}).pipe(Schema.filter((media) => oneSource(media)))
export const Audio = Schema.Struct({ ...mediaFields, caption: absent("audio messages have no caption") }).pipe(
  Schema.filter((media) => oneSource(media))
)
export const Sticker = Schema.Struct({ ...mediaFields, caption: absent("stickers have no caption") }).pipe(
  Schema.filter((media) => oneSource(media))
)

const coordinate = (limit: number) =>
  Schema.Union(Schema.Number, Schema.NumberFromString).pipe(
    Schema.filter((n) => (Number.isFinite(n) && Math.abs(n) <= limit) || `must be a number from -${limit} to ${limit}`)
  )

export const Location = Schema.Struct({
  latitude: coordinate(90),
  longitude: coordinate(180),
  name: optional(NonEmpty(1000)),
  address: optional(NonEmpty(1000))
})

/** One upstream contact card: `name.formatted_name` is required; everything else passes through. */
const Contact = Schema.Struct(
  { name: Schema.Struct({ formatted_name: NonEmpty(1000) }, OtherKeys) },
  OtherKeys
)

export const Contacts = Schema.Array(Contact).pipe(
  Schema.minItems(1, { message: () => "must hold at least one contact" })
)

export const Reaction = Schema.Struct({
  message_id: NonEmpty(256),
  /** An empty emoji removes the reaction. */
  emoji: Schema.String.pipe(
    Schema.maxLength(32, { message: () => "must be one emoji (or empty to remove the reaction)" })
  )
})

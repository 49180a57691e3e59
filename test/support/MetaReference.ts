/**
 * The upstream's contract as others wrote it, read at test time from `../shared/reference` (beside
 * the repository): Meta's Business Messaging OpenAPI document (v23.0, MIT) and real webhook payloads
 * from pywa and whatsapp-api-js (MIT; `webhook-fixtures/SOURCES.md`). The document's schemas are
 * known to reject its own examples (research: upstream-contract.md §1), so only its examples are
 * used, as fixtures.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { parse } from "yaml"

type Json = string | number | boolean | null | { readonly [key: string]: Json } | ReadonlyArray<Json>
export type JsonObject = { readonly [key: string]: Json }

export const isObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u)

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..")

/** The main checkout of this repository (a git worktree lives elsewhere), when git can tell. */
const mainCheckout = (): string | undefined => {
  try {
    const common = execFileSync("git", ["rev-parse", "--path-format=absolute", "--git-common-dir"], {
      cwd: repoRoot,
      encoding: "utf8"
    }).trim()
    return dirname(common)
  } catch {
    return undefined
  }
}

/** `../shared/reference` from the repository's root (from the main checkout's, for a worktree). */
const referenceDir = (() => {
  const main = mainCheckout()
  const tried = [...new Set([repoRoot, ...(main === undefined ? [] : [main])])].map((root) =>
    join(root, "..", "shared", "reference")
  )
  const found = tried.find((dir) => existsSync(join(dir, "meta-openapi")) && existsSync(join(dir, "webhook-fixtures")))
  if (found === undefined) {
    throw new Error(
      `The upstream reference files are missing: expected meta-openapi/ and webhook-fixtures/ under ${
        tried.join(" or ")
      } ` +
        "(the shared folder beside the repository; see webhook-fixtures/SOURCES.md)"
    )
  }
  return found
})()

const META_DOCUMENT = join(referenceDir, "meta-openapi", "business-messaging-api_v23.0.yaml")

let parsed: JsonObject | undefined

/** Meta's OpenAPI document, parsed once per test file. */
const metaDocument = (): JsonObject => {
  if (parsed !== undefined) return parsed
  const document: unknown = parse(readFileSync(META_DOCUMENT, "utf8"))
  if (!isObject(document) || !isObject(document.paths)) {
    throw new Error(`${META_DOCUMENT} is not an OpenAPI document with paths`)
  }
  parsed = document
  return document
}

export interface NamedExample {
  readonly name: string
  readonly value: Json
}

const at = (value: Json | undefined, ...keys: ReadonlyArray<string>): Json | undefined => {
  let current = value
  for (const key of keys) current = isObject(current) ? current[key] : undefined
  return current
}

/** The request body examples of one operation of Meta's document, by name. */
export const requestExamples = (
  path: string,
  method: string,
  contentType = "application/json"
): ReadonlyArray<NamedExample> => {
  const examples = at(metaDocument(), "paths", path, method, "requestBody", "content", contentType, "examples")
  if (!isObject(examples)) {
    throw new Error(`Meta's document has no ${contentType} request examples for ${method.toUpperCase()} ${path}`)
  }
  return Object.entries(examples).map(([name, example]) => ({ name, value: at(example, "value") ?? null }))
}

/** The response examples of one operation of Meta's document for a status, by name. */
export const responseExamples = (path: string, method: string, status = "200"): ReadonlyArray<NamedExample> => {
  const content = at(metaDocument(), "paths", path, method, "responses", status, "content", "application/json")
  const examples = at(content, "examples")
  return isObject(examples)
    ? Object.entries(examples).map(([name, example]) => ({ name, value: at(example, "value") ?? null }))
    : []
}

export interface Fixture {
  /** e.g. "pywa/message_status.sent.json", or "meta/Text Message" for the document's examples. */
  readonly name: string
  readonly payload: JsonObject
}

const jsonFiles = (dir: string): ReadonlyArray<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? jsonFiles(join(dir, entry.name)) : entry.name.endsWith(".json") ? [join(dir, entry.name)] : []
  ).sort()

/** Every payload in the webhook fixtures folder, then Meta's own webhook examples (`POST /whatsapp/webhooks`). */
/**
 * Whether a fixture file is a Graph request body or answer rather than a webhook payload: SOURCES.md
 * names them (`*.request*.json`, sends to the Graph; `*send_response*`, the Graph's answer to a send).
 */
const isGraphExchangeFixture = (name: string) => /\.request(\.|$)|send_response/.test(name)

const fixtureFiles = (): ReadonlyArray<Fixture> => {
  const folder = join(referenceDir, "webhook-fixtures")
  return jsonFiles(folder).map((file): Fixture => {
    const payload: unknown = JSON.parse(readFileSync(file, "utf8"))
    if (!isObject(payload)) throw new Error(`${file} is not a JSON object`)
    return { name: relative(folder, file), payload }
  })
}

/** The Graph request bodies and the answer the fixtures folder holds (see isGraphExchangeFixture). */
export const graphExchangeFixtures = (): ReadonlyArray<Fixture> =>
  fixtureFiles().filter((f) => isGraphExchangeFixture(f.name))

export const webhookFixtures = (): ReadonlyArray<Fixture> => {
  const files = fixtureFiles().filter((f) => !isGraphExchangeFixture(f.name))
  const meta = requestExamples("/whatsapp/webhooks", "post").map((example): Fixture => {
    if (!isObject(example.value)) throw new Error(`Meta's webhook example ${example.name} is not a JSON object`)
    return { name: `meta/${example.name}`, payload: example.value }
  })
  return [...files, ...meta]
}

/** `value` with `f` applied to every value in it, depth first from the top. */
const mapJson = (value: Json, f: (value: Json) => Json): Json => {
  const mapped = f(value)
  if (Array.isArray(mapped)) return mapped.map((item) => mapJson(item, f))
  if (isObject(mapped)) return Object.fromEntries(Object.entries(mapped).map(([k, item]) => [k, mapJson(item, f)]))
  return mapped
}

/**
 * The payload addressed to a tenant, as SOURCES.md says: only `entry[].id` (the business account)
 * and `value.metadata.phone_number_id` are rewritten; everything else stays as written.
 */
export const addressedTo = (
  payload: JsonObject,
  tenant: { readonly wabaId: string; readonly phoneNumberId: string }
): JsonObject => {
  const entries = payload.entry
  if (!Array.isArray(entries)) return payload
  const entry = entries.map((e) => {
    if (!isObject(e)) return e
    const changes = Array.isArray(e.changes)
      ? e.changes.map((change) => {
        if (!isObject(change) || !isObject(change.value) || !isObject(change.value.metadata)) return change
        const metadata = { ...change.value.metadata, phone_number_id: tenant.phoneNumberId }
        return { ...change, value: { ...change.value, metadata } }
      })
      : e.changes
    return Object.fromEntries(
      Object.entries(e).map(([k, v]) => [k, k === "id" ? tenant.wabaId : k === "changes" ? changes ?? null : v])
    )
  })
  return Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, k === "entry" ? entry : v]))
}

/**
 * Meta's request examples hold Postman placeholders (`{{Recipient-Phone-Number}}`, `<IMAGE_OBJECT_ID>`,
 * `http(s)://image-url`, `language-and-locale-code`). They are filled with values of the right form,
 * as a user of the collection does; every other text stays as written.
 */
const PLACEHOLDERS: Readonly<Record<string, string>> = {
  "{{Recipient-Phone-Number}}": "16505551234",
  "{{Recipient-WA-Phone-Number}}": "16505551234",
  "<WHATSAPP_USER_PHONE_NUMBER>": "16505551234",
  "{{Flow-ID}}": "1308927590133476",
  "{{Flow-Name}}": "signup",
  "<AUDIO_OBJECT_ID>": "1037543291543636",
  "<DOCUMENT_OBJECT_ID>": "1037543291543637",
  "<IMAGE_OBJECT_ID>": "1037543291543638",
  "<MEDIA_OBJECT_ID>": "1037543291543639",
  "<VIDEO_OBJECT_ID>": "1037543291543640",
  "<MSGID_OF_MSG_YOU_ARE_REPLYING_TO>": "wamid.HBgLMTY1MDUwNzY1MjAVAgASGBQzQTk5RkM3",
  "<MSGID_OF_PREV_MSG>": "wamid.HBgLMTY1MDUwNzY1MjAVAgASGBQzQTk5RkM3",
  "<TEMPLATE_NAME>": "order_update",
  "template-name": "order_update",
  "language-and-locale-code": "en_US",
  "<HEADER_TYPE>": "text"
}

const LINK_PLACEHOLDER = /^<?http\(s\):\/\/([^>]*)>?$/

export const filledPlaceholders = (value: Json): Json =>
  mapJson(value, (v) => {
    if (typeof v !== "string") return v
    const link = LINK_PLACEHOLDER.exec(v)
    if (link !== null) return `https://example.com/${link[1] ?? ""}`
    return PLACEHOLDERS[v] ?? v
  })

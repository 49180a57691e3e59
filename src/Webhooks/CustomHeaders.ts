/**
 * Static request headers a webhook adds to every delivery (`headers` on create and PATCH): at most
 * MAX_HEADERS, names HTTP tokens (stored lower-case) outside a deny list of framing, hop-by-hop and
 * signing headers, values without control characters (CR, LF, NUL…). Values of headers named like
 * secrets (authorization, cookie, anything with token, secret, key, password, auth, session or
 * credential in its name) are stored encrypted and shown redacted; the others are stored and shown
 * as given.
 */
import { Schema } from "effect"

export const MAX_HEADERS = 10
const MAX_NAME = 64
const MAX_VALUE = 1024

/** What a record shows instead of a secret header's value. */
export const REDACTED = "[redacted]"

/** Headers the hub writes itself, or that would change how the request is framed or routed. */
const DENIED: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  "content-type",
  "content-encoding",
  "transfer-encoding",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "upgrade",
  "expect",
  "user-agent",
  "webhook-id",
  "webhook-timestamp",
  "webhook-signature"
])
const DENIED_PREFIXES = ["proxy-", "webhook-", "sec-"]

const SECRET_NAMES: ReadonlySet<string> = new Set(["authorization", "cookie", "api-key", "apikey"])
const SECRET_PARTS = ["token", "secret", "key", "password", "passwd", "auth", "session", "credential", "signature"]

/** An RFC 9110 token: the characters a header name may hold. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
/** Visible ASCII, spaces, tabs and non-ASCII text: no CR, LF, NUL or other control characters. */
const VALUE = /^[\t\x20-\x7e\u0080-\uffff]*$/

export const isSecretHeader = (name: string): boolean =>
  SECRET_NAMES.has(name) || SECRET_PARTS.some((part) => name.includes(part))

const nameProblem = (name: string): string | undefined => {
  const lower = name.toLowerCase()
  if (name.length === 0 || name.length > MAX_NAME || !TOKEN.test(name)) {
    return `header name ${JSON.stringify(name.slice(0, MAX_NAME))} must be an HTTP token of 1 to ${MAX_NAME} characters`
  }
  if (DENIED.has(lower) || DENIED_PREFIXES.some((prefix) => lower.startsWith(prefix))) {
    return `header ${lower} is set by the hub or changes how the request is sent; it cannot be a custom header`
  }
  return undefined
}

const valueProblem = (name: string, value: string): string | undefined =>
  value.length > MAX_VALUE
    ? `the value of ${name.toLowerCase()} must be at most ${MAX_VALUE} characters`
    : !VALUE.test(value) || value.trim() !== value
    ? `the value of ${name.toLowerCase()} must not hold control characters (CR, LF, NUL…) or leading or trailing spaces`
    : undefined

/** The `headers` object of a request: checked as a whole, every problem named; names come back lower-case. */
export const CustomHeadersInput = Schema.Record({ key: Schema.String, value: Schema.String }).pipe(
  Schema.filter((headers) => {
    const names = Object.keys(headers)
    const problems: Array<string> = []
    if (names.length > MAX_HEADERS) problems.push(`at most ${MAX_HEADERS} headers`)
    const seen = new Set<string>()
    for (const name of names) {
      const lower = name.toLowerCase()
      const problem = nameProblem(name) ?? valueProblem(name, headers[name] ?? "")
      if (problem !== undefined) problems.push(problem)
      else if (seen.has(lower)) problems.push(`header ${lower} is given twice`)
      seen.add(lower)
    }
    return problems.length === 0 || problems.join("; ")
  }),
  Schema.transform(Schema.Record({ key: Schema.String, value: Schema.String }), {
    strict: true,
    decode: (headers) =>
      Object.fromEntries(Object.entries(headers).map(([name, value]) => [name.toLowerCase(), value])),
    encode: (headers) => headers
  })
).annotations({
  description:
    `Up to ${MAX_HEADERS} static request headers sent with every delivery, e.g. {"authorization": "Bearer …", "x-tenant": "acme"}. ` +
    "Names are HTTP tokens (case-insensitive, stored lower-case) other than host, content-*, transfer-encoding, connection, " +
    "keep-alive, te, trailer, upgrade, expect, user-agent, proxy-*, sec-* and webhook-*; values have no control characters, " +
    `at most ${MAX_VALUE} characters. Headers named like secrets (authorization, cookie, *token*, *secret*, *key*, *password*, ` +
    `*auth*, *session*, *credential*) are stored encrypted and shown as "${REDACTED}". On PATCH the given object replaces them all ({} removes them); ` +
    `a secret header given as "${REDACTED}" keeps its stored value, so a record read and sent back changes nothing.`
})

/** Headers as stored: the plain ones as JSON (secret names with a null value) and the secret ones apart, to encrypt. */
export interface StoredHeaders {
  /** JSON object of every header: plain values, and null for the secret ones. */
  readonly shown: string | null
  /** JSON object of the secret headers, to encrypt; null when there are none. */
  readonly secret: string | null
}

export const splitHeaders = (headers: Readonly<Record<string, string>>): StoredHeaders => {
  const entries = Object.entries(headers)
  if (entries.length === 0) return { shown: null, secret: null }
  const secret = entries.filter(([name]) => isSecretHeader(name))
  return {
    shown: JSON.stringify(
      Object.fromEntries(entries.map(([name, value]) => [name, isSecretHeader(name) ? null : value]))
    ),
    secret: secret.length === 0 ? null : JSON.stringify(Object.fromEntries(secret))
  }
}

const parseObject = (text: string | null): Record<string, unknown> => {
  if (text === null) return {}
  const parsed: unknown = JSON.parse(text)
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? { ...parsed } : {}
}

/** The headers a record shows: plain values as stored, secret ones redacted. */
export const shownHeaders = (shown: string | null): Record<string, string> =>
  Object.fromEntries(
    Object.entries(parseObject(shown)).map(([name, value]) => [name, typeof value === "string" ? value : REDACTED])
  )

/** The headers a delivery sends: the plain ones and the decrypted secret ones. */
export const sentHeaders = (shown: string | null, secret: string | null): Record<string, string> => {
  const sent: Record<string, string> = {}
  for (const [name, value] of Object.entries(parseObject(shown))) if (typeof value === "string") sent[name] = value
  for (const [name, value] of Object.entries(parseObject(secret))) if (typeof value === "string") sent[name] = value
  return sent
}

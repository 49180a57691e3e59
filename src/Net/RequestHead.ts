/**
 * The one writer of HTTP/1.1 request heads, for every request the hub sends over its own connections
 * (Graph calls and webhook deliveries alike). Every part of the head is checked before a byte is
 * written: the method and each header name must be RFC 9110 tokens; header values may hold only
 * HTAB, SP, visible ASCII and obs-text (never CR, LF, NUL or another control byte, nor a character
 * beyond one byte, which latin1 would silently cut). A caller's text can therefore never add a
 * header, end the head early or split the request. The writer owns the headers that frame the
 * request (host, content-length, connection, transfer-encoding): a caller's are left out.
 */
import { Data } from "effect"

/** A request that cannot be written: the message names the part that was refused. */
export class HeaderRefused extends Data.TaggedError("HeaderRefused")<{ readonly message: string }> {}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/
/** The request target and the Host value: visible ASCII only (a URL's serialisation always is). */
const VISIBLE = /^[\x21-\x7e]+$/

/** Headers the writer writes itself, from the request's own facts. */
const OWN_HEADERS = new Set(["host", "content-length", "connection", "transfer-encoding"])

const refused = (message: string) => new HeaderRefused({ message })

/** The caller's header lines, checked; the writer's own headers are skipped. */
const headerLines = (headers: Readonly<Record<string, string>>): string | HeaderRefused => {
  let lines = ""
  // for-in rather than Object.entries: no array per header on the hot paths.
  for (const name in headers) {
    const value = headers[name]
    if (value === undefined || OWN_HEADERS.has(name.toLowerCase())) continue
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) {
      return refused(`the header ${JSON.stringify(name)} cannot be sent`)
    }
    lines += `${name}: ${value}\r\n`
  }
  return lines
}

/** Whether every header could be written: for requests another client (fetch) writes, refused the same way. */
export const checkHeaders = (headers: Readonly<Record<string, string>>): HeaderRefused | undefined => {
  const lines = headerLines(headers)
  return typeof lines === "string" ? undefined : lines
}

/**
 * A whole request, head and body, in one buffer: `target` is the path and query, `host` the Host
 * header's value (a webhook's name, while the connection goes to the address checked for it).
 * Content-Length is written whenever there is a body, and for every method but GET and HEAD.
 */
export const requestBytes = (
  method: string,
  target: string,
  host: string,
  headers: Readonly<Record<string, string>>,
  body: Uint8Array | string
): Buffer | HeaderRefused => {
  if (!TOKEN.test(method)) return refused(`the method ${JSON.stringify(method)} cannot be sent`)
  if (!VISIBLE.test(target)) return refused(`the request target ${JSON.stringify(target)} cannot be sent`)
  if (!VISIBLE.test(host)) return refused(`the host ${JSON.stringify(host)} cannot be sent`)
  const lines = headerLines(headers)
  if (typeof lines !== "string") return lines
  const length = typeof body === "string" ? Buffer.byteLength(body) : body.length
  const framing = length > 0 || (method !== "GET" && method !== "HEAD") ? `content-length: ${length}\r\n` : ""
  const head = `${method} ${target} HTTP/1.1\r\nhost: ${host}\r\n${lines}${framing}\r\n`
  // Every character of the head was checked to be one byte, so its latin1 length is its length.
  const bytes = Buffer.allocUnsafe(head.length + length)
  bytes.write(head, 0, "latin1")
  if (typeof body === "string") bytes.write(body, head.length, "utf8")
  else bytes.set(body, head.length)
  return bytes
}

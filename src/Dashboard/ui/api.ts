/**
 * The dashboard's only way to the hub: the public API, with the signed-in token as Bearer. Every
 * failure comes back as the API's own `message` (or what kept the request from reaching the hub).
 */

export interface ApiError {
  /** The HTTP status; 0 when the hub could not be reached. */
  readonly status: number
  readonly message: string
  readonly code: string | undefined
  /** A refusal's Retry-After header (a 429 or 503), in seconds. */
  readonly retryAfterSeconds?: number
}

export type ApiResult<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: ApiError }

export type Query = Readonly<Record<string, string | number | undefined>>

/** Called when the hub refuses the token itself (401): the session is over. */
let onUnauthorized: (message: string) => void = () => {}
export const whenUnauthorized = (handler: (message: string) => void) => {
  onUnauthorized = handler
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Retry-After as seconds (the hub writes whole seconds; an HTTP date is read too). */
const retryAfterOf = (header: string | null): number | undefined => {
  if (header === null || header.trim() === "") return undefined
  const seconds = Number(header)
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds)
  const at = Date.parse(header)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - Date.now()) / 1000))
}

/** The API's error body `{statusCode, message, error?}`, or a message for an answer that is not one. */
const errorOf = (status: number, body: unknown, retryAfter: string | null): ApiError => {
  const seconds = retryAfterOf(retryAfter)
  const wait = seconds === undefined ? {} : { retryAfterSeconds: seconds }
  if (isRecord(body) && typeof body.message === "string") {
    return { status, message: body.message, code: typeof body.error === "string" ? body.error : undefined, ...wait }
  }
  return { status, message: `The hub answered ${status} without an error message`, code: undefined, ...wait }
}

export const pathWith = (path: string, query: Query = {}) => {
  const params = new URLSearchParams()
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== "") params.set(name, String(value))
  }
  const text = params.toString()
  return text === "" ? path : `${path}?${text}`
}

const parse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** One API call with `token`. The answer's body is typed by the caller (the hub's schema for that endpoint). */
export const callWith = async <A>(
  token: string,
  method: string,
  path: string,
  options: { readonly query?: Query; readonly json?: unknown } = {}
): Promise<ApiResult<A>> => {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` }
  if (options.json !== undefined) headers["content-type"] = "application/json"
  let response: Response
  try {
    response = await fetch(pathWith(path, options.query), {
      method,
      headers,
      ...(options.json === undefined ? {} : { body: JSON.stringify(options.json) })
    })
  } catch (cause) {
    return { ok: false, error: { status: 0, message: `Could not reach the hub: ${String(cause)}`, code: undefined } }
  }
  const text = await response.text()
  if (!response.ok) {
    return { ok: false, error: errorOf(response.status, parse(text), response.headers.get("retry-after")) }
  }
  // A 204 has no body; its callers ask for `void`.
  const value: A = text === "" ? undefined : JSON.parse(text)
  return { ok: true, value }
}

let currentToken = ""
export const setToken = (token: string) => {
  currentToken = token
}

/** A call with the signed-in token; a 401 ends the session. */
export const call = async <A>(
  method: string,
  path: string,
  options: { readonly query?: Query; readonly json?: unknown } = {}
) => {
  const result = await callWith<A>(currentToken, method, path, options)
  if (!result.ok && result.error.status === 401) onUnauthorized(result.error.message)
  return result
}

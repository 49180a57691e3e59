/**
 * A recording fake of the Graph API (Bun.serve on 127.0.0.1 port 0) for tests of the hub in graph mode.
 * Every request is recorded; tests script answers with `respond`, and anything unscripted gets a
 * plausible default success for the known Graph paths (404 Graph error 100/33 for unknown ones).
 * Media uploaded to it can be looked up and downloaded again, like the real upstream.
 */
import { Context, Duration, Effect, Layer, Option, Redacted, type Stream } from "effect"
import { createHash, randomBytes } from "node:crypto"
import { makeSignal } from "./Signals.js"
import { testHub, type TestHubOptions } from "./TestHub.js"

interface FormFile {
  readonly filename: string
  readonly type: string
  readonly size: number
  readonly text: string
}

export interface RecordedRequest {
  readonly method: string
  /** e.g. "/v23.0/106540352242922/messages" */
  readonly path: string
  readonly query: Readonly<Record<string, string>>
  /** Lower-cased names. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body, or undefined. */
  readonly json: unknown
  /** Multipart fields, or undefined when the body is not multipart. */
  readonly form: Readonly<Record<string, string | FormFile>> | undefined
}

export interface FakeResponse {
  readonly status?: number
  /** JSON unless it is a string (sent as is, text/plain unless headers say otherwise). */
  readonly body?: unknown
  readonly headers?: Record<string, string>
  /** Never answer (for timeout tests); the connection is dropped when the fake stops. */
  readonly hang?: boolean
  /** Answer only once this settles (to hold a call in flight until the test lets it go). */
  readonly after?: Promise<void>
  /** Answer the headers and these first bytes of the body, then never the rest (a download that stalls). */
  readonly stallAfter?: string
}

export interface FakeMatch {
  readonly method?: string
  /** Exact path (with or without the "/v23.0" prefix) or a pattern tested against the full path. */
  readonly path: string | RegExp
}

export class FakeGraph extends Context.Tag("FakeGraph")<FakeGraph, {
  /** e.g. http://127.0.0.1:PORT/v23.0 */
  readonly baseUrl: string
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Dies if there was no request. */
  readonly lastRequest: Effect.Effect<RecordedRequest>
  /** Fires as each request is recorded: the count of requests so far, then each new count. */
  readonly received: Stream.Stream<number>
  /** Waits until at least `count` requests were recorded (woken by each request, never by polling). */
  readonly waitForRequests: (count: number) => Effect.Effect<ReadonlyArray<RecordedRequest>>
  /** Answer the next matching request(s) with this response; `times` default 1; later rules win over earlier ones and defaults. */
  readonly respond: (match: FakeMatch, response: FakeResponse, times?: number) => Effect.Effect<void>
  /** Forgets recorded requests and scripted answers. */
  readonly reset: Effect.Effect<void>
}>() {}

const VERSION = "/v23.0"

interface Rule {
  readonly match: FakeMatch
  readonly response: FakeResponse
  remaining: number
}

interface StoredMedia {
  readonly bytes: Uint8Array<ArrayBuffer>
  readonly type: string
  readonly sha256: string
}

const digits = (n: number) =>
  Array.from({ length: n }, (_, i) => (i === 0 ? 1 + Math.floor(Math.random() * 9) : Math.floor(Math.random() * 10)))
    .join("")
const wamid = () => `wamid.${randomBytes(24).toString("base64")}`
const trace = () => randomBytes(9).toString("base64url")
const cursors = { cursors: { before: "QVFIUmJlZm9yZQ", after: "QVFIUmFmdGVy" } }

const graphErrorBody = (message: string, code: number, subcode?: number) => ({
  error: {
    message,
    type: code === 100 ? "GraphMethodException" : "OAuthException",
    code,
    ...(subcode === undefined ? {} : { error_subcode: subcode }),
    fbtrace_id: trace()
  }
})

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const matches = (rule: Rule, method: string, path: string) => {
  if (rule.match.method !== undefined && rule.match.method.toUpperCase() !== method) return false
  const wanted = rule.match.path
  return typeof wanted === "string" ? wanted === path || `${VERSION}${wanted}` === path : wanted.test(path)
}

const toResponse = (answer: FakeResponse): Response => {
  const status = answer.status ?? 200
  const headers = new Headers(answer.headers)
  if (!headers.has("facebook-api-version")) headers.set("facebook-api-version", "v23.0")
  headers.set("x-fb-trace-id", trace())
  if (typeof answer.body === "string") {
    if (!headers.has("content-type")) headers.set("content-type", "text/plain")
    return new Response(answer.body, { status, headers })
  }
  if (!headers.has("content-type")) headers.set("content-type", "application/json")
  return new Response(JSON.stringify(answer.body ?? {}), { status, headers })
}

/**
 * Parses multipart/form-data by hand: Bun's own parser rewrites part content types
 * (adding ";charset=utf-8"), and tests must see exactly what the hub sent.
 */
interface RawPart {
  readonly filename: string
  readonly type: string
  readonly bytes: Uint8Array<ArrayBuffer>
}

const parseMultipart = (raw: Buffer, contentType: string): Record<string, string | RawPart> => {
  const boundary = /boundary="?([^";]+)"?/.exec(contentType)?.[1]
  const form: Record<string, string | RawPart> = {}
  if (boundary === undefined) return form
  const delimiter = Buffer.from(`--${boundary}`)
  let at = raw.indexOf(delimiter)
  while (at !== -1) {
    const start = at + delimiter.length
    if (raw.subarray(start, start + 2).toString() === "--") break
    const next = raw.indexOf(delimiter, start)
    if (next === -1) break
    const part = raw.subarray(start + 2, next - 2) // skip the CRLF after the delimiter and before the next one
    const headerEnd = part.indexOf("\r\n\r\n")
    const headers = part.subarray(0, headerEnd).toString("utf8")
    const content = part.subarray(headerEnd + 4)
    const name = /name="([^"]*)"/.exec(headers)?.[1] ?? ""
    const filename = /filename="([^"]*)"/.exec(headers)?.[1]
    const type = /content-type:\s*([^\r\n]+)/i.exec(headers)?.[1]?.trim() ?? ""
    form[name] = filename === undefined
      ? content.toString("utf8")
      : { filename, type, bytes: Uint8Array.from(content) }
    at = next
  }
  return form
}

const record = async (request: Request, url: URL): Promise<RecordedRequest> => {
  const headers: Record<string, string> = {}
  request.headers.forEach((value, name) => {
    headers[name.toLowerCase()] = value
  })
  const contentType = headers["content-type"] ?? ""
  let json: unknown = undefined
  let form: Record<string, string | FormFile> | undefined = undefined
  if (contentType.startsWith("multipart/form-data")) {
    const parts = parseMultipart(Buffer.from(await request.arrayBuffer()), contentType)
    form = {}
    for (const [name, part] of Object.entries(parts)) {
      form[name] = typeof part === "string"
        ? part
        : {
          filename: part.filename,
          type: part.type,
          size: part.bytes.byteLength,
          text: new TextDecoder().decode(part.bytes)
        }
    }
  } else {
    const text = await request.text()
    if (text !== "") {
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
    }
  }
  return {
    method: request.method,
    path: url.pathname,
    query: Object.fromEntries(url.searchParams),
    headers,
    json,
    form
  }
}

/** The default answers of the fake: plausible Graph successes for the calls the hub makes. */
const makeDefaults = (origin: () => string) => {
  const media = new Map<string, StoredMedia>()

  const answer = async (request: Request, url: URL, recorded: RecordedRequest): Promise<Response> => {
    const method = request.method
    if (method === "GET" && url.pathname.startsWith("/lookaside/")) {
      const stored = media.get(url.pathname.slice("/lookaside/".length))
      if (stored === undefined) return toResponse({ status: 404, body: "Not Found" })
      return new Response(new Blob([stored.bytes]), {
        headers: { "content-type": stored.type, "content-length": String(stored.bytes.byteLength) }
      })
    }
    if (!url.pathname.startsWith(`${VERSION}/`)) {
      return toResponse({ status: 404, body: graphErrorBody("Unknown path components", 2500) })
    }
    const segments = url.pathname.slice(VERSION.length + 1).split("/").map(decodeURIComponent)
    const [node = "", edge, child] = segments
    const body = isRecord(recorded.json) ? recorded.json : {}
    const ok = (value: unknown) => toResponse({ body: value })

    // The Marketing Messages API takes the same body and answers the same way.
    if (method === "POST" && (edge === "messages" || edge === "marketing_messages") && segments.length === 2) {
      const to = typeof body.to === "string" ? body.to : ""
      return ok({
        messaging_product: "whatsapp",
        contacts: [{ input: to, wa_id: to.replace(/\D/g, "") }],
        messages: [{ id: wamid(), ...(body.type === "template" ? { message_status: "accepted" } : {}) }]
      })
    }
    if (method === "POST" && edge === "media" && segments.length === 2) {
      const file =
        parseMultipart(Buffer.from(await request.arrayBuffer()), request.headers.get("content-type") ?? "").file
      const id = digits(16)
      if (file !== undefined && typeof file !== "string") {
        media.set(id, {
          bytes: file.bytes,
          type: file.type || "application/octet-stream",
          sha256: createHash("sha256").update(file.bytes).digest("hex")
        })
      }
      return ok({ id })
    }
    if (method === "GET" && segments.length === 1 && node.endsWith("@g.us")) {
      return ok({
        id: node,
        messaging_product: "whatsapp",
        subject: "Lucky Shrub VIPs",
        description: "Early access to drops",
        creation_timestamp: 1750269342,
        suspended: false,
        total_participant_count: 2,
        participants: [{ wa_id: "16505551234" }, { wa_id: "16505551235" }],
        join_approval_mode: "approval_required"
      })
    }
    if (method === "GET" && segments.length === 1 && recorded.query.phone_number_id !== undefined) {
      let known = media.get(node)
      if (known === undefined) {
        const bytes = new TextEncoder().encode(`fake media ${node}`)
        known = { bytes, type: "image/jpeg", sha256: createHash("sha256").update(bytes).digest("hex") }
        media.set(node, known)
      }
      return ok({
        messaging_product: "whatsapp",
        url: `${origin()}/lookaside/${node}?ext=${Math.floor(Date.now() / 1000) + 300}`,
        mime_type: known.type,
        sha256: known.sha256,
        file_size: String(known.bytes.byteLength),
        id: node
      })
    }
    // A number's throughput level (scripted with respond for another level).
    if (method === "GET" && segments.length === 1 && recorded.query.fields === "throughput") {
      return ok({ throughput: { level: "STANDARD" }, id: node })
    }
    if (method === "GET" && segments.length === 1 && /^\d+$/.test(node)) {
      return ok({
        id: node,
        name: "order_update",
        language: "en_US",
        status: "APPROVED",
        category: "UTILITY",
        components: []
      })
    }
    if (edge === "message_templates" && segments.length === 2) {
      if (method === "POST") {
        return ok({
          id: digits(15),
          status: "PENDING",
          category: typeof body.category === "string" ? body.category : "UTILITY"
        })
      }
      // A lookup of one template by name and language (a broadcast's) finds it APPROVED.
      const { name, language } = recorded.query
      return ok({
        data: name === undefined || language === undefined
          ? []
          : [{ id: digits(15), name, language, status: "APPROVED", category: "UTILITY" }],
        paging: cursors
      })
    }
    if (edge === "settings" && segments.length === 2) {
      if (method === "POST") return ok({ success: true })
      return ok({
        calling: {
          status: "ENABLED",
          call_icon_visibility: "DEFAULT",
          callback_permission_status: "ENABLED",
          srtp_key_exchange_protocol: "DTLS"
        },
        payload_encryption: { status: "disabled" },
        storage_configuration: { status: "DEFAULT" }
      })
    }
    if (method === "GET" && edge === "phone_numbers" && segments.length === 2) {
      return ok({
        data: [{
          id: "106540352242922",
          display_phone_number: "+1 555-078-3881",
          verified_name: "Lucky Shrub",
          quality_rating: "GREEN",
          status: "CONNECTED"
        }],
        paging: cursors
      })
    }
    if (method === "POST" && edge === "calls" && segments.length === 2) {
      return ok({ messaging_product: "whatsapp", success: true })
    }
    if (method === "GET" && edge === "activities" && segments.length === 2) {
      return ok({
        data: [{
          id: "1234567890123456",
          activity_type: "TEMPLATE_CREATED",
          timestamp: "2025-10-14T16:45:00Z",
          actor_type: "USER",
          actor_name: "Marketing Team",
          description: "Template created",
          details: { template_name: "welcome_message" }
        }],
        paging: cursors
      })
    }
    if (method === "GET" && edge === "business_compliance_info" && segments.length === 2) {
      return ok({
        data: [{
          whatsapp_business_account_id: "102290129340398",
          messaging_product: "whatsapp",
          entity_name: "Lucky Shrub Private Limited",
          entity_type: "Partnership",
          is_registered: true
        }]
      })
    }
    // A number's groups: none unless a test scripts them (GET /groups/{id} checks the group is listed here).
    if (method === "GET" && edge === "groups" && segments.length === 2) return ok({ data: [], paging: { cursors: {} } })
    if (method === "GET" && edge === "message_qrdls") {
      const qr = (code: string) => ({
        code,
        prefilled_message: "Show me Cyber Monday deals!",
        deep_link_url: `https://wa.me/message/${code}`
      })
      return segments.length === 3
        ? ok({ data: [qr(child ?? "")] })
        : ok({ data: [qr("ANED2T5QRU7HG1"), qr("WOMVT6TJ2BP7A1")], paging: cursors })
    }
    if (method === "GET" && edge === "flows" && segments.length === 2) {
      return ok({
        data: [
          { id: "1308927590133476", name: "signup", status: "DRAFT", categories: ["SIGN_UP"], validation_errors: [] },
          { id: "1308927590133477", name: "survey", status: "PUBLISHED", categories: ["SURVEY"], validation_errors: [] }
        ],
        paging: cursors
      })
    }
    if (edge === "assets" && segments.length === 2) {
      if (method === "POST") return ok({ success: true, validation_errors: [] })
      return ok({
        data: [{ name: "flow.json", asset_type: "FLOW_JSON", download_url: `${origin()}/lookaside/flow-${node}.json` }],
        paging: cursors
      })
    }
    if (method === "POST" && edge === "deprecate" && segments.length === 2) return ok({ success: true })
    if (method === "GET" && edge === "whatsapp_business_profile" && segments.length === 2) {
      return ok({
        data: [{
          about: "Plants, delivered.",
          address: "1 Hacker Way",
          description: "Lucky Shrub",
          email: "hello@luckyshrub.com",
          profile_picture_url: "https://example.com/p.jpg",
          websites: ["https://luckyshrub.com"],
          vertical: "RETAIL",
          messaging_product: "whatsapp"
        }]
      })
    }
    if (edge === "block_users" && segments.length === 2) {
      if (method === "GET") return ok({ data: [], paging: { cursors: {} } })
      // Each user taken: a number answered with its wa_id, a business-scoped user id with its user_id.
      const users = (Array.isArray(body.block_users) ? body.block_users : []).filter(isRecord).map((item) =>
        typeof item.user_id === "string"
          ? { input: item.user_id, user_id: item.user_id }
          : { input: String(item.user), wa_id: String(item.user).replace(/\D/g, "") }
      )
      return ok({
        messaging_product: "whatsapp",
        block_users: { [method === "DELETE" ? "removed_users" : "added_users"]: users }
      })
    }
    return toResponse({
      status: 404,
      body: graphErrorBody(
        `Unsupported ${method.toLowerCase()} request. Object with ID '${node}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
        100,
        33
      )
    })
  }
  return { answer, reset: () => media.clear() }
}

export const fakeGraphLayer: Layer.Layer<FakeGraph> = Layer.scoped(
  FakeGraph,
  Effect.gen(function*() {
    const requests: Array<RecordedRequest> = []
    const listeners = new Set<() => void>()
    const received = makeSignal()
    let rules: Array<Rule> = []
    let origin = ""
    const defaults = makeDefaults(() => origin)

    const server = yield* Effect.acquireRelease(
      Effect.sync(() =>
        Bun.serve({
          hostname: "127.0.0.1",
          port: 0,
          idleTimeout: 0,
          fetch: async (request) => {
            const url = new URL(request.url)
            const recorded = await record(request.clone(), url)
            requests.push(recorded)
            for (const listener of [...listeners]) listener()
            received.fire()
            const rule = [...rules].reverse().find((r) => r.remaining > 0 && matches(r, request.method, url.pathname))
            if (rule === undefined) return defaults.answer(request, url, recorded)
            rule.remaining--
            if (rule.remaining <= 0) rules = rules.filter((r) => r !== rule)
            if (rule.response.hang === true) return new Promise<Response>(() => {})
            const first = rule.response.stallAfter
            if (first !== undefined) {
              const body = new ReadableStream<Uint8Array>({
                start: (controller) => controller.enqueue(new TextEncoder().encode(first))
              })
              return new Response(body, { headers: { "content-type": "application/octet-stream" } })
            }
            if (rule.response.after !== undefined) await rule.response.after
            return toResponse(rule.response)
          }
        })
      ),
      (server) => Effect.promise(() => server.stop(true))
    )
    origin = `http://127.0.0.1:${server.port}`

    return FakeGraph.of({
      baseUrl: `${origin}${VERSION}`,
      requests: Effect.sync(() => [...requests]),
      received: received.changes,
      waitForRequests: (count) =>
        Effect.async<ReadonlyArray<RecordedRequest>>((resume) => {
          const check = () => {
            if (requests.length < count) return
            listeners.delete(check)
            resume(Effect.succeed([...requests]))
          }
          listeners.add(check)
          check()
          return Effect.sync(() => listeners.delete(check))
        }),
      lastRequest: Effect.suspend(() => {
        const last = requests.at(-1)
        return last === undefined ? Effect.dieMessage("FakeGraph received no request") : Effect.succeed(last)
      }),
      respond: (match, response, times = 1) =>
        Effect.sync(() => void rules.push({ match, response, remaining: times })),
      reset: Effect.sync(() => {
        requests.length = 0
        rules = []
        defaults.reset()
      })
    })
  })
)

/** A fixed test key, so graph mode (which refuses to generate one) can store access tokens. */
const TEST_SECRET_KEY = Option.some(Redacted.make(Uint8Array.from({ length: 32 }, (_, i) => i + 1)))

/**
 * A hub whose upstream is GraphUpstream pointed at a FakeGraph (both provided; HUB_SECRET_KEY set).
 * Timeouts and retry delays are short so failure tests finish quickly.
 */
export const testHubOnFakeGraph = (settings: TestHubOptions = {}, logging?: Layer.Layer<never>) =>
  Layer.unwrapEffect(
    Effect.map(FakeGraph, (fake) =>
      testHub({
        upstream: "graph",
        graphUrl: fake.baseUrl,
        secretKey: TEST_SECRET_KEY,
        graphRetryBase: Duration.millis(5),
        ...settings
      }, logging))
  ).pipe(Layer.provideMerge(fakeGraphLayer))

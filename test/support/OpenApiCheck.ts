/**
 * Every answer the test suite receives from a hub is checked against the hub's OpenAPI document
 * (the one GET /openapi.json serves), so the document cannot drift from the wire: the status must be
 * documented for the operation matched by method and path, the content type one it names, the body
 * valid against its schema (JSON Schema 2020-12, as OpenAPI 3.1 has it), and documented headers
 * (Retry-After on 429) present and valid. An answer for no documented operation must be the 404
 * ErrorBody the edge renders. TestHub.request calls `expectDocumented` on each answer.
 *
 * Validation is openapi-backend's (operation matching, and Ajv validators compiled per operation and
 * status), with Ajv's 2020-12 dialect (OpenAPI 3.1's) in place of its default draft-07.
 */
import { OpenApi } from "@effect/platform"
import Ajv2020 from "ajv/dist/2020.js"
import { OpenAPIBackend, SetMatchType } from "openapi-backend"
import { HubApi } from "../../src/Api.js"

type Json = Record<string, unknown>

const isRecord = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

/** The document as the hub serves it. */
export const hubDocument = (): Json => JSON.parse(JSON.stringify(OpenApi.fromApi(HubApi)))

let backend: Promise<OpenAPIBackend> | undefined

const documented = () =>
  backend ??= new OpenAPIBackend({
    definition: JSON.parse(JSON.stringify(hubDocument())),
    strict: true,
    // Skips openapi-backend's own check of the document, which knows OpenAPI 3.0 only (Redocly lints
    // this 3.1 document: npm run lint:openapi), and compiles each operation's validators when first used.
    quick: true,
    validate: true,
    customizeAjv: (_, options) => new Ajv2020({ ...options, strict: false, validateFormats: false, allErrors: true })
  }).init()

/** One answer as the test saw it. */
export interface Answer {
  readonly method: string
  /** Path and query, as requested. */
  readonly url: string
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

/** What the hub serves beside its operations: the document itself and Swagger UI. */
const undocumented: Readonly<Record<string, string>> = {
  "GET /openapi.json": "application/json",
  "GET /docs": "text/html"
}

const describe = (answer: Answer) => `${answer.method} ${answer.url} answered ${answer.status}`

const parseJson = (answer: Answer): unknown => {
  try {
    return JSON.parse(answer.text)
  } catch {
    throw new Error(`${describe(answer)} with a body that is not JSON: ${answer.text.slice(0, 200)}`)
  }
}

/** Whether an answer's Content-Type is one the response documents (binary bodies keep the upstream's type). */
const contentTypeFits = (documentedTypes: ReadonlyArray<string>, contentType: string) =>
  documentedTypes.some((type) => type === "application/octet-stream" || contentType.split(";")[0]?.trim() === type)

/** Throws, naming what differs, unless the answer is what the document says the operation answers. */
export const expectDocumented = async (answer: Answer): Promise<void> => {
  const api = await documented()
  const [path = "/", query = ""] = answer.url.split("?", 2)
  const operation = api.matchOperation({ method: answer.method, path, headers: {}, query })
  const beside = undocumented[`${answer.method} ${path}`]
  if (beside !== undefined) {
    if (answer.status !== 200 || !(answer.headers.get("content-type") ?? "").startsWith(beside)) {
      throw new Error(`${describe(answer)}`)
    }
    return
  }
  if (operation === undefined) {
    // No operation: the edge's route_not_found, an ErrorBody.
    const body = parseJson(answer)
    if (answer.status !== 404 || !isRecord(body) || body.statusCode !== 404 || typeof body.message !== "string") {
      throw new Error(
        `${describe(answer)}, which the document has no operation for, and not with a 404 ErrorBody: ${
          answer.text.slice(0, 300)
        }`
      )
    }
    return
  }
  const response = isRecord(operation.responses) ? operation.responses[String(answer.status)] : undefined
  if (!isRecord(response)) {
    throw new Error(
      `${describe(answer)}: status ${answer.status} is not documented for ${operation.operationId} (${
        answer.text.slice(0, 300)
      })`
    )
  }
  const content = isRecord(response.content) ? response.content : undefined
  if (content === undefined) {
    if (answer.text !== "") {
      throw new Error(`${describe(answer)} with a body, where the document says none: ${answer.text.slice(0, 200)}`)
    }
  } else {
    const contentType = answer.headers.get("content-type") ?? ""
    if (!contentTypeFits(Object.keys(content), contentType)) {
      throw new Error(
        `${describe(answer)} as ${contentType}, where the document says ${Object.keys(content).join(" or ")}`
      )
    }
    if ("application/json" in content) {
      const checked = api.validator.validateResponse(parseJson(answer), operation, answer.status)
      if (!checked.valid) {
        throw new Error(
          `${describe(answer)} with a body the document does not allow: ${JSON.stringify(checked.errors)}\n${
            answer.text.slice(0, 500)
          }`
        )
      }
    }
  }
  const headers: Record<string, string> = {}
  answer.headers.forEach((value, name) => {
    headers[name] = value
  })
  const checkedHeaders = api.validator.validateResponseHeaders(headers, operation, {
    statusCode: answer.status,
    setMatchType: SetMatchType.Superset
  })
  if (!checkedHeaders.valid) {
    throw new Error(
      `${describe(answer)} without the headers the document names: ${JSON.stringify(checkedHeaders.errors)}`
    )
  }
}

/** `fetch` for tests that call a hub directly: the answer is checked as TestHub.request's are (its body read from a clone). */
export const checkedFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
  const response = await fetch(input, init)
  const { pathname, search } = new URL(input instanceof Request ? input.url : input)
  await expectDocumented({
    method: init.method ?? (input instanceof Request ? input.method : "GET"),
    url: `${pathname}${search}`,
    status: response.status,
    headers: response.headers,
    text: await response.clone().text()
  })
  return response
}

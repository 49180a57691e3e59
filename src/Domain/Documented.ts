/**
 * An endpoint's text in the OpenAPI document: a summary, a description, and the token kinds it
 * accepts, read from its own `accepts` annotation (the rule the Authentication middleware applies),
 * so the document cannot say otherwise than the hub does.
 */
import { type HttpApiEndpoint, type HttpMethod, OpenApi } from "@effect/platform"
import { Context, Option } from "effect"
import { acceptedKinds, OperatorCredential } from "./Access.js"
import { isRecord } from "./Json.js"
import type { TokenKind } from "./Principal.js"

const kindNames: Record<TokenKind, string> = {
  session: "a session token (from `hub session create`)",
  organization: "an organization token",
  instance: "an instance token"
}

/** The sentence naming who may call an endpoint: the token kinds it accepts, the operator's credential, or no token. */
export const accessText = (annotations: Context.Context<never>): string => {
  const kinds = acceptedKinds(annotations)
  if (kinds === undefined) {
    return Option.getOrElse(Context.getOption(annotations, OperatorCredential), () => "Needs no Bearer token.")
  }
  return `Accepts ${kinds.map((kind) => kindNames[kind]).join(" or ")} as \`Authorization: Bearer <token>\`.`
}

/** The request body's example, set on each of its media types (the example Swagger UI fills in). */
const withRequestExample = (example: unknown) => <Operation extends object>(operation: Operation): Operation => {
  const content =
    "requestBody" in operation && isRecord(operation.requestBody) && isRecord(operation.requestBody.content)
      ? operation.requestBody.content
      : {}
  for (const media of Object.values(content)) if (isRecord(media)) media.example = example
  return operation
}

/**
 * Annotates an endpoint with its summary and description, ending with the token kinds it accepts
 * (its `accepts` annotation, so apply that first),
 * and its request body's example (one a caller can send as it is: test/openapi.test.ts sends each).
 */
export const documented =
  (summary: string, description?: string, options: { readonly example?: unknown } = {}) =>
  <Name extends string, Method extends HttpMethod.HttpMethod, Path, UrlParams, Payload, Headers, Success, Error, R, RE>(
    endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>
  ): HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE> =>
    endpoint.annotateContext(OpenApi.annotations({
      summary,
      description: [description, accessText(endpoint.annotations)].filter((text) => text !== undefined).join("\n\n"),
      ...(options.example === undefined ? {} : { transform: withRequestExample(options.example) })
    }))

/**
 * A typed client of the hub for TypeScript programs: HttpApiClient over HubApi, the contract the hub
 * serves. Requests are encoded and answers decoded with the endpoints' own schemas, and an error
 * answer arrives as the hub's typed error (NotFound, BadRequest, TooManyRequests, …), decoded from
 * its ErrorBody, to be caught by its tag.
 *
 *   const hub = yield* makeHubClient({ baseUrl: "http://127.0.0.1:3000", token: process.env.HUB_TOKEN })
 *   const sent = yield* hub.messages.send({ payload: { to: "16505551234", type: "text", text: { body: "Hi" } }, headers: {} })
 *   const page = yield* hub.messages.list({ urlParams: { status: "read" } })
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, type Layer } from "effect"
import { HubApi } from "./Api.js"

export interface HubClientOptions {
  /** The hub's address, such as http://127.0.0.1:3000. */
  readonly baseUrl: string
  /** A session, organization or instance token, sent as `Authorization: Bearer <token>` on every call. */
  readonly token?: string | undefined
  /** The HTTP client to call with; fetch when not given. */
  readonly httpClient?: Layer.Layer<HttpClient.HttpClient> | undefined
}

/** A client of every endpoint of the hub, grouped as HubApi groups them (`hub.messages.send`, `hub.webhooks.create`, …). */
export const makeHubClient = (options: HubClientOptions) => {
  const token = options.token
  return HttpApiClient.make(HubApi, {
    baseUrl: options.baseUrl,
    ...(token === undefined ? {} : { transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token)) })
  }).pipe(Effect.provide(options.httpClient ?? FetchHttpClient.layer))
}

export type HubClient = Effect.Effect.Success<ReturnType<typeof makeHubClient>>

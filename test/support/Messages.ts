/** Helpers shared by the messaging suites: sending, listing, and waiting for the fake upstream. */
import { Effect } from "effect"
import { FakeGraph, type RecordedRequest } from "./FakeGraph.js"
import { TestHub } from "./TestHub.js"

export const sendMessage = (token: string, json: unknown, headers?: Record<string, string>) =>
  Effect.flatMap(TestHub, (hub) => hub.request("POST", "/api/messages", { token, json, ...(headers === undefined ? {} : { headers }) }))

export const listMessages = (token: string, query = "") =>
  Effect.flatMap(TestHub, (hub) => hub.request("GET", `/api/messages${query === "" ? "" : `?${query}`}`, { token }))

/** The send requests the fake received for one phone number (each test uses its own tenant). */
export const sendsTo = (phoneNumberId: string): Effect.Effect<ReadonlyArray<RecordedRequest>, never, FakeGraph> =>
  Effect.map(
    Effect.flatMap(FakeGraph, (fake) => fake.requests),
    (requests) => requests.filter((r) => r.method === "POST" && r.path === `/v23.0/${phoneNumberId}/messages`)
  )

/**
 * Waits (in real time: the hub runs on the TestClock) until the fake has received `count` sends for the
 * number: the signal that the hub is now waiting on the upstream.
 */
export const untilSendsReach = (phoneNumberId: string, count: number) =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < 1000; attempt++) {
      if ((yield* sendsTo(phoneNumberId)).length >= count) return
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 5)))
    }
    return yield* Effect.dieMessage(`the fake upstream never received ${count} send(s) for ${phoneNumberId}`)
  })

export const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The `data` array of a list answer. */
export const dataOf = (body: Readonly<Record<string, unknown>>): ReadonlyArray<Record<string, unknown>> =>
  Array.isArray(body.data) ? body.data.filter(isRecord) : []

/** The `details[].field` names of a validation answer. */
export const fieldsOf = (body: Readonly<Record<string, unknown>>): ReadonlyArray<string> =>
  Array.isArray(body.details) ? body.details.filter(isRecord).map((d) => String(d.field)) : []

/** The first upstream message id of a send answer. */
export const waIdOf = (body: Readonly<Record<string, unknown>>): string => {
  const messages = Array.isArray(body.messages) ? body.messages.filter(isRecord) : []
  return String(messages[0]?.id)
}

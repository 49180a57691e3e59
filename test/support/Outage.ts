/**
 * A stream of requests for the database-outage tests: upstream posts (one status change each), sends
 * answered at once and queued sends, spread over the hubs, each answer kept (status, Retry-After,
 * time taken, body). The tests then check what every answer promised: a 200 post is stored and
 * delivered, a 200 or 202 send is recorded; and that nothing was answered otherwise than 200, 202, or
 * 503 with Retry-After, nor took longer than the configured timeouts.
 */
import { expect } from "@effect/vitest"
import { Duration, Effect } from "effect"
import type { makeReceiver, ReceivedRequest } from "./Receivers.js"
import { envelope, status, statusChange, wamid } from "./UpstreamPayloads.js"

type Kind = "post" | "send" | "queued"

export interface Answer {
  readonly kind: Kind
  readonly status: number
  readonly retryAfter: string | null
  readonly ms: number
  readonly text: string
  /** The status id a post carried; the message id a send was answered with. */
  readonly id: string
  readonly at: number
}

export interface LoadTarget {
  readonly baseUrl: string
  readonly token: string
  readonly number: { readonly phoneNumberId: string; readonly wabaId: string }
}

/** No answer within this is a hang (PostgreSQL's connect timeout is 10 s). */
const ANSWER_BOUND_MS = 15_000

const request = async (target: LoadTarget, kind: Kind, n: number): Promise<Answer> => {
  const started = performance.now()
  const id = kind === "post" ? wamid() : ""
  const init: RequestInit = kind === "post"
    ? {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(
        envelope([target.number.wabaId, [statusChange(target.number, status(id, "sent", 1750263773))]])
      )
    }
    : {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${target.token}`,
        ...(kind === "queued" ? { prefer: "respond-async" } : {})
      },
      body: JSON.stringify({ to: `1555${String(n % 1000).padStart(7, "0")}`, type: "text", text: { body: `n${n}` } })
    }
  const path = kind === "post" ? "/upstream/events" : "/api/messages"
  try {
    const response = await fetch(`${target.baseUrl}${path}`, {
      ...init,
      signal: AbortSignal.timeout(ANSWER_BOUND_MS + 5_000)
    })
    const text = await response.text()
    const answered = kind === "post" ? id : messageIdOf(text)
    return {
      kind,
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      ms: performance.now() - started,
      text,
      id: answered,
      at: Date.now()
    }
  } catch (error) {
    return {
      kind,
      status: 0,
      retryAfter: null,
      ms: performance.now() - started,
      text: String(error),
      id,
      at: Date.now()
    }
  }
}

const messageIdOf = (text: string): string => {
  try {
    const body: unknown = JSON.parse(text)
    if (typeof body !== "object" || body === null) return ""
    if ("id" in body && typeof body.id === "string") return body.id
    const messages = "messages" in body && Array.isArray(body.messages) ? body.messages : []
    const first: unknown = messages[0]
    return typeof first === "object" && first !== null && "id" in first && typeof first.id === "string" ? first.id : ""
  } catch {
    return ""
  }
}

/** A load running until stopped: `workers` loops, each sending its next request as its last is answered. */
export const startLoad = (targets: ReadonlyArray<LoadTarget>, workers = 6) => {
  const answers: Array<Answer> = []
  const listeners = new Set<() => void>()
  let running = true
  let n = 0
  const kinds: ReadonlyArray<Kind> = ["post", "post", "send", "queued"]
  const loops = Array.from({ length: workers }, async (_, w) => {
    while (running) {
      const i = n++
      const target = targets[i % targets.length]
      if (target === undefined) return
      answers.push(await request(target, kinds[(i + w) % kinds.length] ?? "post", i))
      for (const listener of [...listeners]) listener()
    }
  })
  return {
    answers,
    /** Resolves once `count` more answers that pass `check` arrived. */
    moreAnswers: (count: number, check: (answer: Answer) => boolean = () => true) =>
      new Promise<void>((resolve) => {
        const from = answers.length
        const listener = () => {
          if (answers.slice(from).filter(check).length < count) return
          listeners.delete(listener)
          resolve()
        }
        listeners.add(listener)
      }),
    stop: async () => {
      running = false
      await Promise.all(loops)
      return answers
    }
  }
}

/**
 * Answers outside the promise: anything but 200, 202, or 503 with Retry-After; or too slow. A direct send
 * may also be paced (429 with Retry-After): while the database is gone the 503s come fast, and the load's
 * loops, each sending again as soon as answered, then ask more than a number's 80 sends a second.
 */
const brokenAnswers = (answers: ReadonlyArray<Answer>) =>
  answers.filter((a) =>
    !(a.status === 200 || a.status === 202 || (a.status === 503 && a.retryAfter !== null) ||
      (a.kind === "send" && a.status === 429 && a.retryAfter !== null)) || a.ms > ANSWER_BOUND_MS
  )

/** The status ids (one per post) a delivery carried. */
const changeIds = (request: ReceivedRequest): ReadonlyArray<string> => {
  const ids: Array<string> = []
  const walk = (value: unknown, key: string | undefined) => {
    if (Array.isArray(value)) { for (const item of value) walk(item, key) }
    else if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        if (key === "statuses" && k === "id" && typeof v === "string") ids.push(v)
        walk(v, k === "id" ? key : k)
      }
    }
  }
  walk(JSON.parse(request.body), undefined)
  return ids
}

/** The ids of the answers of `kind` that accepted their request (200 or 202). */
export const accepted = (answers: ReadonlyArray<Answer>, kind: Answer["kind"]) =>
  answers.filter((a) => a.kind === kind && (a.status === 200 || a.status === 202)).map((a) => a.id)

type Load = ReturnType<typeof startLoad>

/** Waits for `count` more answers that pass `check`; dies after 30 s with the last answers and `context`. */
export const moreAnswers = (
  load: Load,
  what: string,
  count: number,
  check: (a: Answer) => boolean,
  context: () => string = () => ""
) =>
  Effect.promise(() => load.moreAnswers(count, check)).pipe(
    Effect.timeoutFail({
      duration: Duration.seconds(30),
      onTimeout: () =>
        new Error(
          `${what}: not in time; the last answers: ${
            JSON.stringify(load.answers.slice(-5).map((a) => [a.kind, a.status, a.text.slice(0, 200)]))
          }\n${context()}`
        )
    }),
    Effect.orDie
  )

/** Every post answered 200 reaches the receiver, each change in one delivery (sent again only under the same webhook-id). */
export const expectEveryPostDelivered = (
  receiver: Effect.Effect.Success<ReturnType<typeof makeReceiver>>,
  answers: ReadonlyArray<Answer>
) =>
  Effect.gen(function*() {
    const posts = accepted(answers, "post")
    expect(posts.length).toBeGreaterThan(0)
    yield* receiver.waitFor("every change answered 200", (requests) => {
      const got = new Set(requests.flatMap(changeIds))
      return posts.every((id) => got.has(id))
    }, Duration.seconds(60))
    const deliveriesOf = new Map<string, Set<string>>()
    for (const request of receiver.requests) {
      for (const id of changeIds(request)) {
        const ids = deliveriesOf.get(id) ?? new Set()
        ids.add(request.headers["webhook-id"] ?? "")
        deliveriesOf.set(id, ids)
      }
    }
    expect(posts.filter((id) => (deliveriesOf.get(id)?.size ?? 0) > 1)).toEqual([])
  })

/** No answer broke the promise, and the outage was seen: some 503s, each a JSON error body. */
export const expectOnlyPromisedAnswers = (answers: ReadonlyArray<Answer>) => {
  expect(brokenAnswers(answers).map((a) => `${a.kind} ${a.status} ${Math.round(a.ms)}ms ${a.text.slice(0, 200)}`))
    .toEqual([])
  const refused = answers.filter((a) => a.status === 503)
  expect(refused.length).toBeGreaterThan(0)
  for (const answer of refused) expect(JSON.parse(answer.text)).toMatchObject({ statusCode: 503 })
}

/**
 * Sandbox Block Users: each phone number's blocked users in memory, in the order they were first
 * blocked, answered as the upstream's `block_users` edge answers them. A user whose number (or the
 * id part of whose business-scoped user id) starts with 999139100 is refused on its own: the call
 * then fails with 139100, its answer listing each user taken and refused.
 */
import { Effect } from "effect"
import { isJsonObject } from "../../Domain/Json.js"
import type { JsonObject } from "../../Domain/Json.js"
import type { GraphQuery, UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { BLOCK_FAILURE_PREFIX, blockUserError, checkReserved, invalidParameter, someUsersFailed } from "./Failures.js"
import { page } from "./Paging.js"

const GRAPH = "https://graph.facebook.com/v23.0"

/** One user of a request: by number (`user`, answered as its wa_id) or by business-scoped user id (`user_id`). */
interface User {
  readonly kind: "wa_id" | "user_id"
  readonly input: string
  readonly id: string
}

const usersOf = (body: JsonObject): Effect.Effect<ReadonlyArray<User>, UpstreamError> => {
  const list = body.block_users
  if (!Array.isArray(list) || list.length === 0) {
    return Effect.fail(invalidParameter("The parameter block_users is required."))
  }
  const users: Array<User> = []
  for (const item of list) {
    if (isJsonObject(item) && typeof item.user === "string") {
      users.push({ kind: "wa_id", input: item.user, id: item.user.replace(/\D/g, "") })
    } else if (isJsonObject(item) && typeof item.user_id === "string") {
      users.push({ kind: "user_id", input: item.user_id, id: item.user_id })
    } else return Effect.fail(invalidParameter("Param block_users[] must have user or user_id"))
  }
  return Effect.succeed(users)
}

/** The sandbox's switch: the number, or the id after a business-scoped user id's country (and ENT.) part. */
const isRefused = (user: User) =>
  (user.kind === "wa_id" ? user.id : user.id.replace(/^[A-Z]{2}\.(ENT\.)?/, "")).startsWith(BLOCK_FAILURE_PREFIX)

const answeredAs = (user: User): JsonObject =>
  user.kind === "wa_id" ? { input: user.input, wa_id: user.id } : { input: user.input, user_id: user.id }

const listed = (user: User): JsonObject =>
  user.kind === "wa_id"
    ? { messaging_product: "whatsapp", wa_id: user.id }
    : { messaging_product: "whatsapp", user_id: user.id }

export const makeBlockStore = () => {
  /** Phone number id → `kind:id` → the user as the list answers it. */
  const blocked = new Map<string, Map<string, JsonObject>>()
  const blockedOf = (phoneNumberId: string) => {
    const known = blocked.get(phoneNumberId)
    if (known !== undefined) return known
    const created = new Map<string, JsonObject>()
    blocked.set(phoneNumberId, created)
    return created
  }

  const change =
    (list: "added_users" | "removed_users") =>
    (target: UpstreamTarget, body: JsonObject): Effect.Effect<JsonObject, UpstreamError> =>
      Effect.gen(function*() {
        yield* checkReserved(target.phoneNumberId)
        const users = yield* usersOf(body)
        yield* checkReserved(...users.filter((user) => user.kind === "wa_id").map((user) => user.id))
        const numberBlocks = blockedOf(target.phoneNumberId)
        const done: Array<JsonObject> = []
        const failed: Array<JsonObject> = []
        for (const user of users) {
          if (isRefused(user)) {
            failed.push({ ...answeredAs(user), errors: [blockUserError] })
            continue
          }
          const key = `${user.kind}:${user.id}`
          if (list === "added_users") numberBlocks.set(key, listed(user))
          else numberBlocks.delete(key)
          done.push(answeredAs(user))
        }
        const outcome = { [list]: done, ...(failed.length === 0 ? {} : { failed_users: failed }) }
        if (failed.length > 0) return yield* Effect.fail(someUsersFailed(outcome))
        return { messaging_product: "whatsapp", block_users: outcome }
      })

  return {
    block: change("added_users"),
    unblock: change("removed_users"),
    list: (target: UpstreamTarget, query: GraphQuery): Effect.Effect<JsonObject, UpstreamError> =>
      Effect.zipRight(
        checkReserved(target.phoneNumberId),
        Effect.suspend(() =>
          page([...blockedOf(target.phoneNumberId).values()], query, {
            link: `${GRAPH}/${target.phoneNumberId}/block_users`
          })
        )
      )
  }
}

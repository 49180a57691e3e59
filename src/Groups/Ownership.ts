/**
 * Whether a group belongs to the instance's number: one access token may reach several business
 * accounts' numbers, so a group id is answered only when it is listed among the number's groups
 * (GET /{phone-number-id}/groups), as templates are checked against the account's list.
 */
import { Effect, Option } from "effect"
import { isJsonObject, type Json, type JsonObject } from "../Domain/Json.js"
import type { Upstream, UpstreamTarget } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"

/** Groups a page asks for: Meta's largest page. */
const PAGE = 1024
/** Pages read at most (10,240 groups): a number with more is past anything Meta lets one number have. */
const MAX_PAGES = 10

/** The group number inside a Cloud API group id (base64url of `capi_group:<number>:<group number>`). */
const groupNumberOf = (opaqueId: string): string | undefined =>
  /^capi_group:\d+:(\d+)/.exec(Buffer.from(opaqueId, "base64url").toString("latin1"))?.[1]

/** Whether a listed id names the requested group, in either of the two forms a group id takes. */
const sameGroup = (listed: string, requested: string): boolean => {
  if (listed === requested) return true
  const numbered = /^(\d+)@g\.us$/.exec(requested)?.[1]
  return numbered !== undefined && groupNumberOf(listed) === numbered
}

/** The ids of a list page: `data[]` of groups, or (as Meta's document writes it) `data.groups[]`. */
const idsOf = (page: JsonObject): ReadonlyArray<string> => {
  const data: Json | undefined = page.data
  const items = Array.isArray(data) ? data : isJsonObject(data) && Array.isArray(data.groups) ? data.groups : []
  return items.flatMap((item: Json) => (isJsonObject(item) && typeof item.id === "string" ? [item.id] : []))
}

const afterOf = (page: JsonObject): string | undefined => {
  const paging = page.paging
  const cursors = isJsonObject(paging) ? paging.cursors : undefined
  const after = isJsonObject(cursors) ? cursors.after : undefined
  return isJsonObject(paging) && paging.next !== undefined && typeof after === "string" ? after : undefined
}

/** Whether the number of `target` lists the group, reading its group list page by page. */
export const numberHasGroup = (
  upstream: Upstream["Type"],
  target: UpstreamTarget,
  groupId: string
): Effect.Effect<boolean, UpstreamError> => {
  const look = (after: string | undefined, pagesLeft: number): Effect.Effect<boolean, UpstreamError> =>
    Effect.flatMap(
      upstream.listGroups(target, { limit: String(PAGE), fields: "id", ...(after === undefined ? {} : { after }) }),
      (page) => {
        if (idsOf(page).some((id) => sameGroup(id, groupId))) return Effect.succeed(true)
        const next = Option.fromNullable(afterOf(page))
        return Option.isSome(next) && pagesLeft > 1 ? look(next.value, pagesLeft - 1) : Effect.succeed(false)
      }
    )
  return look(undefined, MAX_PAGES)
}

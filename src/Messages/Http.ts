import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { BadRequest } from "../Domain/Errors.js"
import { cursorsOf, pageRequest } from "../Domain/Paging.js"
import { servedByHotRoute } from "../Domain/PlainRoute.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { selectorOf } from "../Instances/RequestTarget.js"
import { SendCancellation } from "../SendQueue/Cancel.js"
import type { DateBound } from "./Api.js"
import { type ListFilter, type MessageRow } from "./ListQueries.js"
import { MessagesRepo } from "./Repo.js"

/** Each step's time the hub knows; the current status's from `status_at` for records older than the step columns. */
const statusTimesOf = (row: MessageRow) => {
  const times: { sent?: string; delivered?: string; read?: string; failed?: string } = {}
  if (row.sent_at !== null) times.sent = row.sent_at
  if (row.delivered_at !== null) times.delivered = row.delivered_at
  if (row.read_at !== null) times.read = row.read_at
  if (row.failed_at !== null) times.failed = row.failed_at
  if (row.status !== "pending" && times[row.status] === undefined && row.status_at !== null) {
    times[row.status] = row.status_at
  }
  return times
}

const toRecord = (row: MessageRow) => ({
  id: row.id,
  waMessageId: row.wa_message_id,
  // The customer's number in both directions: an inbound record has no other number to show.
  to: row.to_number ?? row.from_number ?? row.user_id ?? "",
  ...(row.user_id === null ? {} : { userId: row.user_id }),
  ...(row.parent_user_id === null ? {} : { parentUserId: row.parent_user_id }),
  ...(row.username === null ? {} : { username: row.username }),
  ...(row.category === null ? {} : { category: row.category }),
  ...(row.endpoint === null ? {} : { endpoint: row.endpoint }),
  ...(row.origin === null ? {} : { origin: row.origin }),
  ...(row.failure_reason === null ? {} : { failureReason: row.failure_reason }),
  ...(row.send_at === null ? {} : { sendAt: row.send_at }),
  ...(row.expires_at === null ? {} : { expiresAt: row.expires_at }),
  ...(row.priority === null ? {} : { priority: row.priority }),
  type: row.type,
  status: row.status,
  direction: row.direction,
  createdAt: row.created_at,
  statusTimes: statusTimesOf(row)
})

/** The camelCase name or its snake_case alias; both given with different values is a 400. */
const either = <A>(
  camel: { readonly name: string; readonly value: A | undefined },
  snake: { readonly name: string; readonly value: A | undefined },
  same: (a: A, b: A) => boolean
) =>
  camel.value !== undefined && snake.value !== undefined && !same(camel.value, snake.value)
    ? Effect.fail(
      new BadRequest({
        message: `Invalid request: ${snake.name}: conflicts with ${camel.name}; give one of them`,
        error: "validation_failed",
        details: [{ field: snake.name, message: `conflicts with ${camel.name}; give one of them` }]
      })
    )
    : Effect.succeed(camel.value ?? snake.value)

const sameBound = (a: DateBound, b: DateBound) => a.iso === b.iso && a.day === b.day

/** A bare end date covers that whole day: the bound is the next day's start, exclusive. */
const untilBound = (end: DateBound) =>
  end.day
    ? { at: new Date(Date.parse(end.iso) + 86_400_000).toISOString(), inclusive: false }
    : { at: end.iso, inclusive: true }

export const MessagesHttpLive = HttpApiBuilder.group(HubApi, "messages", (handlers) =>
  Effect.gen(function*() {
    const repo = yield* MessagesRepo
    const access = yield* InstanceAccess
    const cancellation = yield* SendCancellation
    return handlers
      // Served by its one handler, Bun's fast route (Messages/FastRoute.ts).
      .handleRaw("send", servedByHotRoute("POST /api/messages"))
      .handle("list", ({ urlParams: query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const selector = selectorOf(query)
          const named = selector.instanceId !== undefined || selector.phoneNumberId !== undefined
          // An instance token always acts for its own instance; an organization token sees all of its instances unless it names one.
          const instance = named || principal.instance !== undefined
            ? yield* access.resolve(principal, selector)
            : undefined
          const start = yield* either({ name: "startDate", value: query.startDate }, {
            name: "start_date",
            value: query.start_date
          }, sameBound)
          const end = yield* either({ name: "endDate", value: query.endDate }, {
            name: "end_date",
            value: query.end_date
          }, sameBound)
          const waMessageId = yield* either(
            { name: "waMessageId", value: query.waMessageId },
            { name: "wa_message_id", value: query.wa_message_id },
            (a, b) => a === b
          )
          if (start !== undefined && end !== undefined && start.iso > end.iso) {
            return yield* new BadRequest({
              message: "Invalid request: endDate: must not be before startDate",
              error: "validation_failed",
              details: [{
                field: query.endDate === undefined ? "end_date" : "endDate",
                message: "must not be before startDate"
              }]
            })
          }
          const page = yield* pageRequest(query)
          const filter: ListFilter = {
            organizationId: principal.organizationId,
            instanceId: instance?.id,
            status: query.status,
            direction: query.direction,
            waMessageId,
            user: query.user,
            createdFrom: start?.iso,
            createdUntil: end === undefined ? undefined : untilBound(end),
            page
          }
          const listed = yield* repo.list(filter)
          return {
            data: listed.rows.map(toRecord),
            total: listed.total,
            page: query.page,
            limit: query.limit,
            ...(listed.totalCapped ? { total_capped: true } : {}),
            cursors: cursorsOf(listed.rows, listed.more, page)
          }
        }))
      .handle("cancel", ({ path }) =>
        Effect.flatMap(CurrentPrincipal, (principal) =>
          Effect.map(cancellation.cancel(principal, path.messageId), toRecord)))
  }))

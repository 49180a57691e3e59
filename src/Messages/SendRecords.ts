/**
 * What a synchronous send's Graph call leaves in its record: the acceptance (Meta's id, kept through a
 * database outage), or the refusal (or a send of unknown outcome) with the upstream's error, and the
 * pairs of identifiers an answer named. Plain where the send core awaits it (Messages/Send.ts).
 */
import { Effect, Exit, Option, Schedule } from "effect"
import type { OrganizationId } from "../Domain/Ids.js"
import type { JsonObject } from "../Domain/Json.js"
import type { RunInRequest } from "../Domain/PlainRoute.js"
import { unavailableOf, untilStored } from "../Sql/Unavailable.js"
import type { SendMessageResponse } from "../Upstream/Upstream.js"
import type { UpstreamError } from "../Upstream/UpstreamError.js"
import { identityLinksOfAnswer } from "./Identities.js"
import type { MessagesRepo } from "./Repo.js"

/** The upstream error as kept in the record's `error` column. */
export const errorRecord = (e: UpstreamError): JsonObject => ({
  kind: e.kind,
  status: e.status,
  code: e.code,
  message: e.message,
  ...(e.subcode === undefined ? {} : { error_subcode: e.subcode }),
  ...(e.fbtraceId === undefined ? {} : { fbtrace_id: e.fbtraceId }),
  ...(e.details === undefined ? {} : { details: e.details })
})

/** Record updates are retried at once: SQLite already waits out locks (busy_timeout), so a delay adds nothing. */
const UPDATE_RETRIES = 2

/**
 * Records the upstream's refusal, or the error of a send of unknown outcome (no answer, or a 2xx the hub
 * could not read: the record stays pending), retried; a failure to record is logged.
 */
export const recordFailure = (repo: MessagesRepo, messageId: string, e: UpstreamError) =>
  (e.kind === "graph" && e.answeredOk !== true
    ? repo.markRefused(messageId, errorRecord(e))
    : repo.noteError(messageId, errorRecord(e)))
    .pipe(
      Effect.retry(Schedule.recurs(UPDATE_RETRIES)),
      Effect.catchAll((cause) =>
        Effect.logError("Could not record the upstream's refusal of a send", { messageId, cause })
      )
    )

/** Records the upstream's acceptance (its message id), and any pair of identifiers its answer named. */
export const recordAcceptance = async (
  repo: MessagesRepo,
  organizationId: OrganizationId,
  messageId: string,
  response: SendMessageResponse,
  inRequest: RunInRequest
) => {
  const waMessageId = response.messages[0]?.id
  if (waMessageId === undefined) {
    return inRequest(
      Effect.logError("The upstream accepted a send without a message id; its record stays pending", { messageId })
    )
  }
  let marked = await repo.markAcceptedNow(messageId, waMessageId)
  for (let retry = 0; retry < UPDATE_RETRIES && Exit.isFailure(marked); retry++) {
    marked = await repo.markAcceptedNow(messageId, waMessageId)
  }
  const learn = learnIdentities(repo, organizationId, messageId, response)
  if (Exit.isSuccess(marked)) return inRequest(learn)
  if (Option.isNone(unavailableOf(marked.cause))) {
    // The statement itself was refused: trying again later would fare the same.
    return inRequest(
      Effect.logError("The upstream accepted a send the hub could not mark accepted; the record stays pending", {
        messageId,
        waMessageId,
        cause: marked.cause
      })
    )
  }
  // Meta took the send, so it is answered 200: its id must outlive a database outage. The answer
  // does not wait; the record is marked in the background once the database takes it again.
  const markedLater = untilStored(
    Effect.flatMap(Effect.promise(() => repo.markAcceptedNow(messageId, waMessageId)), (exit) => exit)
  )
  await inRequest(Effect.forkDaemon(
    Effect.logWarning("The upstream accepted a send the hub could not mark accepted yet; trying again", {
      messageId,
      waMessageId
    }).pipe(
      Effect.zipRight(markedLater),
      Effect.zipRight(learn),
      Effect.catchAllCause((cause) =>
        Effect.logError("The upstream accepted a send the hub could not mark accepted; the record stays pending", {
          messageId,
          waMessageId,
          cause
        })
      )
    )
  ))
}

/** Pairs of identifiers a send's answer named (most name one), kept; a failure only logged. */
const learnIdentities = (
  repo: MessagesRepo,
  organizationId: OrganizationId,
  messageId: string,
  response: SendMessageResponse
) => {
  const links = identityLinksOfAnswer(organizationId, response)
  return links.length === 0 ? Effect.void : repo.learnIdentities(links).pipe(
    Effect.catchAll((cause) =>
      Effect.logWarning("Could not keep the identifiers a send's answer paired", { messageId, cause })
    )
  )
}

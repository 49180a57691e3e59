/** The messaging services: records, Idempotency-Key answers, pacing and the sender that uses them. */
import { Layer } from "effect"
import { IdempotencyKeysLive } from "./Idempotency.js"
import { PacingLive } from "./Pacing.js"
import { MessagesRepoLive } from "./Repo.js"
import { MessageSenderLive } from "./Send.js"

export const MessagesServicesLive = MessageSenderLive.pipe(
  Layer.provideMerge(Layer.mergeAll(MessagesRepoLive, IdempotencyKeysLive, PacingLive))
)

/**
 * The hub's words, defined once: the schemas of the contract, the repositories and the dashboard all
 * import them from here. Plain data importing nothing, so the dashboard's bundle may carry it.
 */

/** A message record's status, in the order a message moves through them (failed ends any). */
export const messageStatuses = ["pending", "sent", "delivered", "read", "failed"] as const
export type MessageStatus = (typeof messageStatuses)[number]

/** Why a queued send ended `failed` without Meta's word on the message (the record's `failureReason`). */
export const failureReasons = ["expired", "cancelled", "refused", "outcome_unknown"] as const
export type FailureReason = (typeof failureReasons)[number]

/** A queued send's lane: transactional sends of a number always go before its bulk ones. */
export const priorities = ["transactional", "bulk"] as const
export type Priority = (typeof priorities)[number]

/** Which way a message went: sent by the business, or received from the user. */
export const directions = ["inbound", "outbound"] as const
export type Direction = (typeof directions)[number]

/** A webhook delivery's status: queued (pending, failed awaiting its retry) or finished. */
export const deliveryStatuses = ["pending", "failed", "succeeded", "dead", "cancelled"] as const
export type DeliveryStatus = (typeof deliveryStatuses)[number]

/** How a webhook's deliveries are ordered: `per_contact` sends each person's one at a time, in the order received. */
export const webhookOrderings = ["none", "per_contact"] as const
export type WebhookOrdering = (typeof webhookOrderings)[number]

/**
 * What became of one delivery attempt: the receiver took it (a 2xx), it failed and a retry follows, or it
 * was the last one of a delivery given up (dead). The webhooks' hourly health counts the same three.
 */
export const attemptOutcomes = ["succeeded", "failed", "dead"] as const
export type AttemptOutcome = (typeof attemptOutcomes)[number]

/** Why a webhook is inactive: its receiver answered 410, it failed too long, or someone turned it off. */
/** How a webhook receives its events: POSTed to its url (push), or read by its owner with GET …/poll (poll). */
export const webhookKinds = ["push", "poll"] as const
export type WebhookKind = (typeof webhookKinds)[number]

export const disabledReasons = ["gone_410", "failing_too_long", "manual"] as const
export type DisabledReason = (typeof disabledReasons)[number]

/** The reasons the hub itself turns a webhook off (counted by the metrics). */
export type AutomaticDisabledReason = Exclude<DisabledReason, "manual">

/** The message types a send may carry (Meta's `type`). */
export const messageTypes = [
  "text",
  "image",
  "audio",
  "video",
  "document",
  "sticker",
  "location",
  "contacts",
  "reaction",
  "template",
  "interactive"
] as const

/** The message types the sandbox can simulate a user sending (POST /sandbox/inbound). */
export const inboundMessageTypes = [
  "text",
  "image",
  "document",
  "audio",
  "video",
  "sticker",
  "location",
  "contacts",
  "interactive",
  "reaction",
  "order"
] as const
export type InboundMessageType = (typeof inboundMessageTypes)[number]

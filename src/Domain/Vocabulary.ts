/**
 * The hub's words, defined once: the schemas of the contract, the repositories and the dashboard all
 * import them from here. Plain data importing nothing, so the dashboard's bundle may carry it.
 */

/** A message record's status, in the order a message moves through them (failed ends any). */
export const messageStatuses = ["pending", "sent", "delivered", "read", "failed"] as const
export type MessageStatus = (typeof messageStatuses)[number]

/** Which way a message went: sent by the business, or received from the user. */
export const directions = ["inbound", "outbound"] as const
export type Direction = (typeof directions)[number]

/**
 * What a message record is made of, shared by the repository and the pure planning of status changes
 * (ChangePlan.ts), so that neither imports the other for its types.
 */
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"

export const messageStatuses = ["pending", "sent", "delivered", "read", "failed"] as const
export type MessageStatus = (typeof messageStatuses)[number]
export type Direction = "outbound" | "inbound"

/** Inbound messages reached the business number; no read receipt is tracked for them. */
export const INBOUND_STATUS: MessageStatus = "delivered"

export interface StatusUpdate {
  readonly instanceId: InstanceId
  readonly waMessageId: string
  readonly status: "sent" | "delivered" | "read" | "failed"
  /** When the upstream says it happened (ISO 8601). */
  readonly at: string
  /** The upstream's errors for a failed status. */
  readonly error?: Json
}

export interface InboundMessage {
  readonly instanceId: InstanceId
  readonly organizationId: OrganizationId
  readonly waMessageId: string
  /** The sender's number (wa_id), or their business-scoped user id when the upstream gives no number (a username user). */
  readonly from: string
  /** The sender's business-scoped user id (BSUID), parent BSUID and username, when the upstream gives them. */
  readonly userId?: string | undefined
  readonly parentUserId?: string | undefined
  readonly username?: string | undefined
  readonly type: string
  /** When the upstream says it was sent (ISO 8601); the record's createdAt. */
  readonly at: string
}

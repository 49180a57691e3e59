/**
 * What a message record is made of, shared by the repository and the pure planning of status changes
 * (ChangePlan.ts), so that neither imports the other for its types.
 */
import type { InstanceId, OrganizationId } from "../Domain/Ids.js"
import type { Json } from "../Domain/Json.js"
import type { Direction, MessageStatus } from "../Domain/Vocabulary.js"

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
  /** The person it names: `recipient_id` (their number) and `recipient_user_id` (their BSUID), as given. */
  readonly recipients?: ReadonlyArray<string>
}

/**
 * A message the upstream told of: an inbound message, or one the business sent elsewhere (an echo
 * from the WhatsApp Business app or an agent, a message of the history synchronised at onboarding).
 */
export interface ReceivedMessage {
  readonly instanceId: InstanceId
  readonly organizationId: OrganizationId
  readonly waMessageId: string
  /** Inbound unless said (an echo, or the business's side of the history). */
  readonly direction?: Direction | undefined
  /**
   * The other party: the sender's number (wa_id) of an inbound message, the recipient's of an
   * outbound one, or their business-scoped user id when the upstream gives no number (a username user).
   */
  readonly party: string
  /** The other party's business-scoped user id (BSUID), parent BSUID and username, when the upstream gives them. */
  readonly userId?: string | undefined
  readonly parentUserId?: string | undefined
  readonly username?: string | undefined
  readonly type: string
  /** When the upstream says it was sent (ISO 8601); the record's createdAt. */
  readonly at: string
  /** Where it came from when not the `messages` field: `smb_message_echoes`, `message_echoes`, `standby`, `history`. */
  readonly origin?: string | undefined
  /** An outbound one's status as the upstream last gave it (a history message's); `sent` when not given. */
  readonly status?: MessageStatus | undefined
}

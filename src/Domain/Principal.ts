/** Who a request acts for, resolved from its Bearer token by the TokenResolver. */
import { Context } from "effect"
import type { InstanceId, OrganizationId } from "./Ids.js"

export type TokenKind = "organization" | "instance" | "session"

export interface InstanceRef {
  readonly id: InstanceId
  readonly organizationId: OrganizationId
  readonly phoneNumberId: string
  readonly wabaId: string
}

export interface Principal {
  readonly kind: TokenKind
  /** The api token or session id, for audit and revocation. */
  readonly credentialId: string
  readonly organizationId: OrganizationId
  /** Set for instance tokens only. */
  readonly instance: InstanceRef | undefined
  /** When the credential stops being valid (sessions), in epoch milliseconds; api tokens do not expire. */
  readonly expiresAt?: number
}

export class CurrentPrincipal extends Context.Tag("CurrentPrincipal")<CurrentPrincipal, Principal>() {}

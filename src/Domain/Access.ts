/**
 * The access policy: which token kinds may call each endpoint, keyed by method and route pattern.
 * It implements the spec's access matrix in one place; every authenticated endpoint needs a row
 * (a test checks that), and a route without one is refused.
 */
import type { TokenKind } from "./Principal.js"

const management: ReadonlyArray<TokenKind> = ["session", "organization"]
export const apiTokens: ReadonlyArray<TokenKind> = ["organization", "instance"]
export const instanceOnly: ReadonlyArray<TokenKind> = ["instance"]

export const AccessPolicy: Readonly<Record<string, ReadonlyArray<TokenKind>>> = {
  "POST /api/auth/api-tokens": ["session"],
  "GET /api/auth/api-tokens": management,
  "DELETE /api/auth/api-tokens/:tokenId": management,
  "DELETE /api/auth/session": ["session"],
  "GET /api/instances": management,
  "POST /api/messages": apiTokens,
  "GET /api/messages": apiTokens,
  "POST /media": instanceOnly,
  "POST /api/media": instanceOnly,
  "GET /media/:mediaId": instanceOnly,
  "GET /media/:mediaId/download": instanceOnly,
  "POST /templates": instanceOnly,
  "GET /templates": instanceOnly,
  "GET /templates/:templateId": instanceOnly,
  // Settings may carry SIP passwords: instance tokens only, as the spec's endpoint table says.
  "GET /api/phone-numbers/settings": instanceOnly,
  "POST /phone-numbers/settings": instanceOnly,
  "POST /api/phone-numbers/settings": instanceOnly,
  // Business account data (spec access table): organization tokens name the instance.
  "GET /phone-numbers/list": apiTokens,
  "POST /api/calls/pre-accept": instanceOnly,
  "GET /api/analytics/activities": apiTokens,
  "GET /api/analytics/compliance": apiTokens,
  "GET /qr-codes": instanceOnly,
  "GET /qr-codes/:qrCodeId": instanceOnly,
  "GET /flows": instanceOnly,
  "GET /flows/:flowId/assets": instanceOnly,
  "POST /flows/:flowId/assets": instanceOnly,
  "POST /flows/:flowId/deprecate": instanceOnly,
  "GET /groups/:groupId": instanceOnly,
  "GET /api/business-profile": instanceOnly,
  // The number's blocked users: organization tokens name the instance.
  "POST /api/block-users": apiTokens,
  "DELETE /api/block-users": apiTokens,
  "GET /api/block-users": apiTokens,
  // Webhooks: organization tokens for their instances, instance tokens for their own.
  "POST /api/webhooks": apiTokens,
  "GET /api/webhooks": apiTokens,
  "GET /api/webhooks/:id": apiTokens,
  "PATCH /api/webhooks/:id": apiTokens,
  "DELETE /api/webhooks/:id": apiTokens,
  "GET /api/webhooks/:id/deliveries": apiTokens,
  "POST /api/webhooks/:id/deliveries/:deliveryId/retry": apiTokens,
  "POST /api/webhooks/:id/rotate-secret": apiTokens,
  "POST /api/webhooks/:id/recover": apiTokens,
  "POST /api/webhooks/:id/test": apiTokens,
  // Deliveries of every webhook the token sees: an organization's, or an instance's.
  "GET /api/deliveries": apiTokens,
  // Simulates an inbound message to the token's instance (organization tokens name it).
  "POST /sandbox/inbound": apiTokens,
  // Simulates upstream changes of any kind for the token's instance.
  "POST /sandbox/changes": apiTokens,
  // Server-sent events of the token's instances (organization tokens: all of them, or the one named).
  "GET /api/events/stream": apiTokens
}

/** Endpoints for the operator's tools, which take no api token: the credential each takes instead, in words. */
export const OperatorAccess: Readonly<Record<string, string>> = {
  "GET /metrics": "Takes no api token: when the hub sets HUB_METRICS_TOKEN, it needs that token as `Authorization: Bearer <token>` " +
    "(401 otherwise); when it does not, it is open."
}

const kindNames: Record<TokenKind, string> = {
  session: "a session token",
  organization: "an organization token",
  instance: "an instance token"
}

/** Why a token kind is refused, in words a caller can act on. */
export const refusal = (kind: TokenKind, allowed: ReadonlyArray<TokenKind>): string => {
  const wanted = allowed.map((k) => kindNames[k]).join(" or ")
  return allowed.length === 0
    ? "This endpoint has no access policy"
    : `This endpoint needs ${wanted}; ${kindNames[kind]} cannot be used here`
}

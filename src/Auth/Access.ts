/**
 * The access policy: which token kinds may call each endpoint, keyed by method and route pattern.
 * It implements the spec's access matrix in one place; every authenticated endpoint needs a row
 * (a test checks that), and a route without one is refused.
 */
import type { TokenKind } from "../Domain/Principal.js"

const management: ReadonlyArray<TokenKind> = ["session", "organization"]
export const apiTokens: ReadonlyArray<TokenKind> = ["organization", "instance"]
export const instanceOnly: ReadonlyArray<TokenKind> = ["instance"]

export const AccessPolicy: Readonly<Record<string, ReadonlyArray<TokenKind>>> = {
  "POST /api/auth/api-tokens": ["session"],
  "GET /api/auth/api-tokens": management,
  "DELETE /api/auth/api-tokens/:tokenId": management,
  "GET /api/instances": management
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

/**
 * Signing in: the token is kept in sessionStorage (this tab only, gone when it closes) and its kind
 * is the API's own answer (GET /api/auth/whoami), so the dashboard offers exactly what the API allows it:
 * the token list is open to session and organization tokens, the message history to organization
 * and instance tokens.
 */
import { type ApiResult, callWith } from "./api.js"
import type { TokenKind, WhoAmI } from "./types.js"

export interface Session {
  readonly token: string
  readonly kind: TokenKind
}

const TOKEN_KEY = "hub.token"
const KIND_KEY = "hub.kind"

const isKind = (s: string | null): s is TokenKind => s === "session" || s === "organization" || s === "instance"

export const storedSession = (): Session | undefined => {
  const token = sessionStorage.getItem(TOKEN_KEY)
  const kind = sessionStorage.getItem(KIND_KEY)
  return token !== null && token !== "" && isKind(kind) ? { token, kind } : undefined
}

export const keepSession = (session: Session) => {
  sessionStorage.setItem(TOKEN_KEY, session.token)
  sessionStorage.setItem(KIND_KEY, session.kind)
}

export const forgetSession = () => {
  sessionStorage.removeItem(TOKEN_KEY)
  sessionStorage.removeItem(KIND_KEY)
}

/** The token's kind, as GET /api/auth/whoami tells it; the API's refusal otherwise. */
export const signIn = async (token: string): Promise<ApiResult<Session>> => {
  const whoami = await callWith<WhoAmI>(token, "GET", "/api/auth/whoami")
  return whoami.ok ? { ok: true, value: { token, kind: whoami.value.kind } } : whoami
}

/** What each page needs of the token (the API's access policy, as the sign-in learned it). */
export const can = {
  listTokens: (kind: TokenKind) => kind !== "instance",
  createTokens: (kind: TokenKind) => kind === "session",
  listInstances: (kind: TokenKind) => kind !== "instance",
  readMessages: (kind: TokenKind) => kind !== "session",
  /** GET /api/stats/timeseries (the overview) answers organization and instance tokens. */
  readStats: (kind: TokenKind) => kind !== "session",
  manageWebhooks: (kind: TokenKind) => kind !== "session",
  watchEvents: (kind: TokenKind) => kind !== "session",
  simulateInbound: (kind: TokenKind) => kind !== "session",
  sendBroadcasts: (kind: TokenKind) => kind !== "session",
  /** GET /templates answers instance tokens only. */
  listTemplates: (kind: TokenKind) => kind === "instance"
}

export const kindLabel: Record<TokenKind, string> = {
  session: "Session token",
  organization: "Organization token",
  instance: "Instance token"
}

/** Whether the hub runs the sandbox upstream (named by the page it serves). */
export const isSandbox = () =>
  document.querySelector("meta[name=\"hub-upstream\"]")?.getAttribute("content") === "sandbox"

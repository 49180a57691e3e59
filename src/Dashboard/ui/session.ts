/**
 * Signing in: the token is kept in sessionStorage (this tab only, gone when it closes) and its kind
 * is learned from the API's own answers, so the dashboard offers exactly what the API allows it:
 * the token list is open to session and organization tokens, the message history to organization
 * and instance tokens.
 */
import { type ApiError, type ApiResult, callWith } from "./api.js"
import type { TokenKind } from "./types.js"

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

const forbidden = (error: ApiError) => error.status === 403

/** The token's kind, from two reads the API answers by kind; the API's refusal otherwise. */
export const signIn = async (token: string): Promise<ApiResult<Session>> => {
  const tokens = await callWith<unknown>(token, "GET", "/api/auth/api-tokens")
  if (!tokens.ok && !forbidden(tokens.error)) return tokens
  if (!tokens.ok) return { ok: true, value: { token, kind: "instance" } }
  const messages = await callWith<unknown>(token, "GET", "/api/messages", { query: { limit: 1 } })
  if (messages.ok) return { ok: true, value: { token, kind: "organization" } }
  return forbidden(messages.error) ? { ok: true, value: { token, kind: "session" } } : messages
}

/** What each page needs of the token (the API's access policy, as the sign-in learned it). */
export const can = {
  listTokens: (kind: TokenKind) => kind !== "instance",
  createTokens: (kind: TokenKind) => kind === "session",
  listInstances: (kind: TokenKind) => kind !== "instance",
  readMessages: (kind: TokenKind) => kind !== "session",
  manageWebhooks: (kind: TokenKind) => kind !== "session",
  watchEvents: (kind: TokenKind) => kind !== "session",
  simulateInbound: (kind: TokenKind) => kind !== "session"
}

export const kindLabel: Record<TokenKind, string> = {
  session: "Session token",
  organization: "Organization token",
  instance: "Instance token"
}

/** Whether the hub runs the sandbox upstream (named by the page it serves). */
export const isSandbox = () => document.querySelector('meta[name="hub-upstream"]')?.getAttribute("content") === "sandbox"

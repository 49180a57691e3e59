/** Bearer secrets: a readable prefix plus 32 random bytes; only their SHA-256 is ever stored. */
import { createHash, randomBytes } from "node:crypto"

export const API_TOKEN_PREFIX = "mhk_"
export const SESSION_TOKEN_PREFIX = "mhs_"

export const generateSecret = (prefix: string): string => prefix + randomBytes(32).toString("base64url")

export const hashSecret = (secret: string): string => createHash("sha256").update(secret).digest("hex")

/** What a listing shows instead of the secret: enough to recognise it, useless to an attacker. */
export const secretHint = (secret: string): string => `${secret.slice(0, 8)}…`

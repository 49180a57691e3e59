/**
 * Signatures both ways: the upstream's `X-Hub-Signature-256` on what it posts to us, and the
 * Standard Webhooks signature (`webhook-signature: v1,<base64 HMAC-SHA256>`) on what we deliver.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto"

export const WEBHOOK_SECRET_PREFIX = "whsec_"

/** A new webhook secret: `whsec_` and the base64 of 24 random bytes (what Standard Webhooks libraries decode). */
export const generateWebhookSecret = (): string => `${WEBHOOK_SECRET_PREFIX}${randomBytes(24).toString("base64")}`

/** The key bytes of a `whsec_…` secret: the base64 part after the prefix. */
export const webhookSecretKey = (secret: string): Uint8Array =>
  Uint8Array.from(Buffer.from(secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret, "base64"))

/** `v1,<sig>` for each key, space-separated: receivers accept the message if any one matches. */
export const webhookSignature = (
  keys: ReadonlyArray<Uint8Array>,
  messageId: string,
  timestampSeconds: number,
  body: string
): string =>
  keys
    .map((key) => `v1,${createHmac("sha256", key).update(`${messageId}.${timestampSeconds}.${body}`).digest("base64")}`)
    .join(" ")

/** Compares secrets without leaking where they differ or their length (both sides are hashed first). */
export const constantTimeEqual = (a: string | Uint8Array, b: string | Uint8Array): boolean =>
  timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest())

const HUB_SIGNATURE = /^sha256=([0-9a-fA-F]{64})$/

/** Checks `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>` in constant time. */
export const verifyHubSignature = (appSecret: string, rawBody: Uint8Array, header: string | undefined): boolean => {
  const match = HUB_SIGNATURE.exec(header?.trim() ?? "")
  if (match === null || match[1] === undefined) return false
  const expected = createHmac("sha256", appSecret).update(rawBody).digest()
  return timingSafeEqual(expected, Buffer.from(match[1], "hex"))
}

/** The header value the upstream would send for a body (tests and the sandbox sign with it). */
export const hubSignature = (appSecret: string, rawBody: string | Uint8Array): string =>
  `sha256=${createHmac("sha256", appSecret).update(rawBody).digest("hex")}`

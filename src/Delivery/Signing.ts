/** The Standard Webhooks signature (`webhook-signature: v1,<base64 HMAC-SHA256>`) on what the hub delivers, and its secrets. */
import { createHmac, randomBytes } from "node:crypto"

const WEBHOOK_SECRET_PREFIX = "whsec_"

/** A new webhook secret: `whsec_` and the base64 of 24 random bytes (what Standard Webhooks libraries decode). */
export const generateWebhookSecret = (): string => `${WEBHOOK_SECRET_PREFIX}${randomBytes(24).toString("base64")}`

/** The key bytes of a `whsec_…` secret: the base64 part after the prefix. */
export const webhookSecretKey = (secret: string): Uint8Array =>
  Uint8Array.from(
    Buffer.from(
      secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret,
      "base64"
    )
  )

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

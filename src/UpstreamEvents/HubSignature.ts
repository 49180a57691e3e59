/** The upstream's `X-Hub-Signature-256` on what it posts to the hub: HMAC-SHA256 of the raw body with the Meta app secret. */
import { createHash, createHmac, timingSafeEqual } from "node:crypto"

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

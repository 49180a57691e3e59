/**
 * What an attempt is signed and sent with: the webhook's secret(s) as signing keys (both during a
 * rotation's overlap) and its custom headers, the secret ones decrypted. Decrypted once per secret
 * rather than once per attempt, which keeps the hot path cheap.
 */
import { Effect } from "effect"
import { LRUCache } from "lru-cache"
import { type SecretCipherShape, SecretSlot } from "../Sql/SecretCipher.js"
import { sentHeaders } from "../Webhooks/CustomHeaders.js"
import type { LeasedDelivery } from "./Records.js"
import { webhookSecretKey, webhookSignature } from "./Signing.js"

/** What an attempt needs decrypted: the keys to sign with and the webhook's custom headers. */
export interface Credentials {
  /** The current secret, and the previous one while a rotation's overlap lasts. */
  readonly keys: ReadonlyArray<Uint8Array>
  /** The webhook's custom headers, secret ones decrypted. */
  readonly headers: Readonly<Record<string, string>>
}

const NO_HEADERS: Readonly<Record<string, string>> = {}

/** What a webhook's deliveries are signed and sent with, as stored (a leased delivery carries it, a poll reads it). */
export type SigningColumns = Pick<
  LeasedDelivery,
  | "webhook_id"
  | "secret_encrypted"
  | "previous_secret_encrypted"
  | "previous_secret_expires_at"
  | "headers"
  | "headers_encrypted"
>

/**
 * The headers a delivery carries, pushed or polled: the webhook's custom headers, then the Standard
 * Webhooks ones, signed over the body with every key.
 */
export const deliveryHeaders = (
  credentials: Credentials,
  messageId: string,
  timestampSeconds: number,
  body: string
) => ({
  ...credentials.headers,
  "content-type": "application/json",
  "webhook-id": messageId,
  "webhook-timestamp": String(timestampSeconds),
  "webhook-signature": webhookSignature(credentials.keys, messageId, timestampSeconds, body)
})

/** The stored secrets a delivery is signed with at `nowMs`, each with the slot it was encrypted for. */
const secretsOf = (d: SigningColumns, nowMs: number): ReadonlyArray<readonly [string, SecretSlot]> => {
  const current = [d.secret_encrypted, SecretSlot.webhookSecret(d.webhook_id)] as const
  return d.previous_secret_encrypted !== null && d.previous_secret_expires_at !== null &&
      Date.parse(d.previous_secret_expires_at) > nowMs
    ? [current, [d.previous_secret_encrypted, SecretSlot.webhookPreviousSecret(d.webhook_id)] as const]
    : [current]
}

/** What is stored of a webhook's custom headers, as a cache key (the row id is part of it). */
const storedHeaders = (d: SigningColumns) => `${d.webhook_id}\u0000${d.headers}\u0000${d.headers_encrypted ?? ""}`

/** A delivery's credentials, decrypted with `cipher` the first time each secret is met. */
export const makeCredentials = (cipher: SecretCipherShape) => {
  // A key is remembered with the slot it was decrypted for: the same ciphertext met in another row
  // or column is decrypted there (and fails), never answered from here.
  const keys = new LRUCache<string, { readonly key: Uint8Array; readonly slot: SecretSlot }>({ max: 10_000 })
  const knownKey = (encrypted: string, slot: SecretSlot) => {
    const known = keys.get(encrypted)
    return known !== undefined && known.slot.rowId === slot.rowId && known.slot.column === slot.column
      ? known.key
      : undefined
  }
  const keyOf = ([encrypted, slot]: readonly [string, SecretSlot]) =>
    Effect.suspend(() => {
      const known = knownKey(encrypted, slot)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.map(Effect.orDie(cipher.decrypt(encrypted, slot)), (secret) => {
        const key = webhookSecretKey(secret)
        keys.set(encrypted, { key, slot })
        return key
      })
    })

  // Custom headers as sent, by what is stored (decrypted once, like the keys; the row id is part of the key).
  const headerSets = new LRUCache<string, Readonly<Record<string, string>>>({ max: 10_000 })
  const customHeaders = (d: SigningColumns): Effect.Effect<Readonly<Record<string, string>>> => {
    if (d.headers === null) return Effect.succeed(NO_HEADERS)
    const stored = storedHeaders(d)
    const known = headerSets.get(stored)
    if (known !== undefined) return Effect.succeed(known)
    const secret = d.headers_encrypted === null
      ? Effect.succeed(null)
      : Effect.orDie(cipher.decrypt(d.headers_encrypted, SecretSlot.webhookHeaders(d.webhook_id)))
    return Effect.map(secret, (decrypted) => {
      const headers = sentHeaders(d.headers, decrypted)
      headerSets.set(stored, headers)
      return headers
    })
  }

  const credentials = (d: SigningColumns, nowMs: number): Effect.Effect<Credentials> => {
    const secrets = secretsOf(d, nowMs)
    // Every attempt asks: what is already decrypted is answered without an effect per secret.
    const known = secrets.map(([encrypted, slot]) => knownKey(encrypted, slot))
    const headers = d.headers === null ? NO_HEADERS : headerSets.get(storedHeaders(d))
    if (known.every((key): key is Uint8Array => key !== undefined) && headers !== undefined) {
      return Effect.succeed({ keys: known, headers })
    }
    return Effect.zipWith(Effect.forEach(secrets, keyOf), customHeaders(d), (keys, headers) => ({ keys, headers }))
  }
  return credentials
}

/**
 * Encrypts instances' upstream access tokens at rest with AES-256-GCM. The key comes from
 * HUB_SECRET_KEY; in sandbox mode without one, the hub generates a key and keeps it beside the database.
 */
import { ConfigError, Context, Data, Effect, Either, Layer, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { HubConfig, parseSecretKey } from "../Config.js"

export class CipherError extends Data.TaggedError("CipherError")<{ readonly message: string }> {}

export class AccessTokenCipher extends Context.Tag("AccessTokenCipher")<AccessTokenCipher, {
  readonly encrypt: (plaintext: string) => string
  readonly decrypt: (stored: string) => Effect.Effect<string, CipherError>
}>() {}

const VERSION = "v1"

export const makeCipher = (key: Uint8Array): AccessTokenCipher["Type"] => ({
  encrypt: (plaintext) => {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", key, iv)
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
    return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`
  },
  decrypt: (stored) =>
    Effect.try({
      try: () => {
        const [version, payload] = stored.split(":")
        if (version !== VERSION || payload === undefined) throw new Error("unknown format")
        const raw = Buffer.from(payload, "base64")
        const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
        decipher.setAuthTag(raw.subarray(12, 28))
        return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString("utf8")
      },
      catch: () => new CipherError({ message: "Cannot decrypt a stored access token: wrong HUB_SECRET_KEY?" })
    })
})

/** The sandbox's own key, generated once and kept (mode 0600) in the database's folder. */
const sandboxKey = (databaseFile: string): Effect.Effect<Uint8Array, ConfigError.ConfigError> =>
  Effect.suspend(() => {
    if (databaseFile === ":memory:") return Effect.succeed(Uint8Array.from(randomBytes(32)))
    const file = join(dirname(databaseFile), "secret.key")
    if (existsSync(file)) {
      return Either.match(parseSecretKey(readFileSync(file, "utf8")), {
        onLeft: () => Effect.fail(ConfigError.InvalidData(["HUB_SECRET_KEY"], `${file} does not hold a 32-byte key; remove it or set HUB_SECRET_KEY`)),
        onRight: Effect.succeed
      })
    }
    mkdirSync(dirname(file), { recursive: true })
    const key = randomBytes(32)
    writeFileSync(file, key.toString("hex"), { mode: 0o600 })
    return Effect.succeed(Uint8Array.from(key))
  })

export const AccessTokenCipherLive = Layer.effect(
  AccessTokenCipher,
  Effect.gen(function*() {
    const config = yield* HubConfig
    if (Option.isSome(config.secretKey)) return makeCipher(Redacted.value(config.secretKey.value))
    // HubConfig refuses graph mode without a key, so only the sandbox gets here.
    return makeCipher(yield* sandboxKey(config.databaseFile))
  })
)

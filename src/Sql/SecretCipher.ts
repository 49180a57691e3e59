/**
 * The cipher of every secret at rest: encrypts what the hub must keep readable (instances' upstream
 * access tokens, webhooks' signing secrets and their secret custom headers) with AES-256-GCM. The
 * key comes from HUB_SECRET_KEY; in sandbox mode without one, the hub generates a key and keeps it
 * beside the database.
 *
 * Each ciphertext is bound to where it is stored: the associated data names the table, the column
 * and the row id, so a ciphertext copied to another row or column (by anyone who can write to the
 * database but lacks the key) fails to decrypt instead of handing one tenant's secret to another.
 * Stored text: `v2:` + base64(12-byte IV | 16-byte tag | ciphertext). Releases before this one wrote
 * `v1:` without associated data; this layer re-encrypts those rows at start (see upgradeLegacyRows).
 */
import { SqlClient } from "@effect/sql"
import { ConfigError, Data, Effect, Either, Option, Redacted } from "effect"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { HubConfig, parseSecretKey } from "../Config.js"

export class CipherError extends Data.TaggedError("CipherError")<{ readonly message: string }> {}

/** Every column that holds an encrypted secret, as `table.column`. */
type SecretColumn =
  | "instances.access_token_encrypted"
  | "webhooks.secret_encrypted"
  | "webhooks.previous_secret_encrypted"
  | "webhooks.headers_encrypted"

/** Where a secret is stored: its ciphertext decrypts only there. */
export interface SecretSlot {
  readonly column: SecretColumn
  readonly rowId: string
}

export const SecretSlot = {
  instanceAccessToken: (instanceId: string): SecretSlot => ({
    column: "instances.access_token_encrypted",
    rowId: instanceId
  }),
  webhookSecret: (webhookId: string): SecretSlot => ({ column: "webhooks.secret_encrypted", rowId: webhookId }),
  webhookPreviousSecret: (webhookId: string): SecretSlot => ({
    column: "webhooks.previous_secret_encrypted",
    rowId: webhookId
  }),
  webhookHeaders: (webhookId: string): SecretSlot => ({ column: "webhooks.headers_encrypted", rowId: webhookId })
}

export interface SecretCipherShape {
  readonly encrypt: (plaintext: string, slot: SecretSlot) => string
  readonly decrypt: (stored: string, slot: SecretSlot) => Effect.Effect<string, CipherError>
}

const VERSION = "v2:"
const LEGACY_VERSION = "v1:"
const IV_BYTES = 12
/**
 * GCM's full tag. Node accepts tags of 4 to 16 bytes unless told the length, and a short tag is far
 * easier to forge; the stored text's length is checked and the decipher told, whatever the runtime.
 */
const TAG_BYTES = 16
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

const associatedData = (slot: SecretSlot) =>
  Buffer.from(JSON.stringify(["messaging-hub", slot.column, slot.rowId]), "utf8")

const seal = (key: Uint8Array, plaintext: string, aad: Buffer | undefined): Buffer => {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES })
  if (aad !== undefined) cipher.setAAD(aad)
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
  return Buffer.concat([iv, cipher.getAuthTag(), body])
}

/** The plaintext of `prefix` + base64(IV | tag | body), or undefined when it is not that or does not authenticate. */
const open = (key: Uint8Array, stored: string, prefix: string, aad: Buffer | undefined): string | undefined => {
  if (!stored.startsWith(prefix)) return undefined
  const payload = stored.slice(prefix.length)
  if (!BASE64.test(payload)) return undefined
  const raw = Buffer.from(payload, "base64")
  if (raw.length < IV_BYTES + TAG_BYTES) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES })
    if (aad !== undefined) decipher.setAAD(aad)
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES))
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

const cannotDecrypt = (slot: SecretSlot) =>
  new CipherError({
    message:
      `Cannot decrypt the secret in ${slot.column} of ${slot.rowId}: wrong HUB_SECRET_KEY, or not written for this row?`
  })

export const makeCipher = (key: Uint8Array): SecretCipherShape => ({
  encrypt: (plaintext, slot) => VERSION + seal(key, plaintext, associatedData(slot)).toString("base64"),
  decrypt: (stored, slot) =>
    Effect.suspend(() => {
      const plaintext = open(key, stored, VERSION, associatedData(slot))
      return plaintext === undefined ? Effect.fail(cannotDecrypt(slot)) : Effect.succeed(plaintext)
    })
})

/** Reads the format before secrets were bound to their rows; only the upgrade at start needs it. */
const decryptLegacy = (key: Uint8Array, stored: string): string | undefined =>
  open(key, stored, LEGACY_VERSION, undefined)

/** The columns the upgrade visits, with the slot each row's secret belongs to. */
const SECRET_COLUMNS: ReadonlyArray<
  { readonly table: string; readonly column: string; readonly slot: (id: string) => SecretSlot }
> = [
  { table: "instances", column: "access_token_encrypted", slot: SecretSlot.instanceAccessToken },
  { table: "webhooks", column: "secret_encrypted", slot: SecretSlot.webhookSecret },
  { table: "webhooks", column: "previous_secret_encrypted", slot: SecretSlot.webhookPreviousSecret }
]

/**
 * Re-encrypts every secret still in the v1 format (no associated data) for its row, in one
 * transaction, before any repository reads them. Not a migration: migrations are plain SQL run before
 * any service and do not have HUB_SECRET_KEY (nor the sandbox's key file), and the version prefix
 * already marks the old rows. Idempotent: once done there are no `v1:` rows, so a later start only
 * runs one read per column; each UPDATE also matches the old text, so two processes starting together
 * cannot overwrite each other. A row the key cannot open is left as it is and reported (as before
 * this release, it fails when it is used).
 */
const upgradeLegacyRows = (key: Uint8Array, cipher: SecretCipherShape) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const legacyRows = (table: string, column: string) =>
      sql<{ readonly id: string; readonly stored: string }>`SELECT id, ${sql(column)} AS stored FROM ${sql(table)}
        WHERE ${sql(column)} LIKE ${`${LEGACY_VERSION}%`}`
    const pending = yield* Effect.forEach(SECRET_COLUMNS, ({ column, table }) => legacyRows(table, column))
    if (pending.every((rows) => rows.length === 0)) return
    const unreadable = yield* Effect.gen(function*() {
      const unreadable: Array<string> = []
      for (const { column, slot, table } of SECRET_COLUMNS) {
        for (const row of yield* legacyRows(table, column)) {
          const plaintext = decryptLegacy(key, row.stored)
          if (plaintext === undefined) {
            unreadable.push(`${table}.${column} of ${row.id}`)
            continue
          }
          yield* sql`UPDATE ${sql(table)} SET ${sql(column)} = ${cipher.encrypt(plaintext, slot(row.id))}
            WHERE id = ${row.id} AND ${sql(column)} = ${row.stored}`
        }
      }
      return unreadable
    }).pipe(sql.withTransaction)
    if (unreadable.length > 0) {
      yield* Effect.logWarning("Secrets at rest that HUB_SECRET_KEY cannot decrypt were left in the old format", {
        secrets: unreadable
      })
    }
  }).pipe(Effect.orDie, Effect.withSpan("SecretCipher.upgradeLegacyRows"))

/** The sandbox's own key, generated once and kept (mode 0600) in the database's folder. */
const sandboxKey = (databaseFile: string): Effect.Effect<Uint8Array, ConfigError.ConfigError> =>
  Effect.suspend(() => {
    if (databaseFile === ":memory:") return Effect.succeed(Uint8Array.from(randomBytes(32)))
    const file = join(dirname(databaseFile), "secret.key")
    if (existsSync(file)) {
      return Either.match(parseSecretKey(readFileSync(file, "utf8")), {
        onLeft: () =>
          Effect.fail(
            ConfigError.InvalidData(
              ["HUB_SECRET_KEY"],
              `${file} does not hold a 32-byte key; remove it or set HUB_SECRET_KEY`
            )
          ),
        onRight: Effect.succeed
      })
    }
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
    const key = randomBytes(32)
    writeFileSync(file, key.toString("hex"), { mode: 0o600 })
    return Effect.succeed(Uint8Array.from(key))
  })

/** The cipher, once every stored secret is in its format: repositories built on it never meet an old row. */
export class SecretCipher extends Effect.Service<SecretCipher>()("SecretCipher", {
  effect: Effect.gen(function*() {
    const config = yield* HubConfig
    // HubConfig refuses graph mode without a key, so only the sandbox makes its own.
    const key = Option.isSome(config.secretKey)
      ? Redacted.value(config.secretKey.value)
      : yield* sandboxKey(config.databaseFile)
    const cipher = makeCipher(key)
    yield* upgradeLegacyRows(key, cipher)
    return cipher
  })
}) {}

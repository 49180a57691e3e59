/**
 * Secrets at rest: AES-256-GCM bound to table, column and row; the full tag required; the format
 * before this binding re-encrypted at start.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Cause, Effect, Exit, Layer, Logger, Option, Redacted } from "effect"
import { createCipheriv, randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { hubConfigWith } from "../src/Config.js"
import { InstanceId } from "../src/Domain/Ids.js"
import { InstancesRepo, InstancesRepoLive } from "../src/Instances/Repo.js"
import { sqliteLayer } from "../src/Sql/Client.js"
import { CipherError, makeCipher, SecretCipher, SecretSlot } from "../src/Sql/SecretCipher.js"
import { seedTenant, testHub } from "./support/TestHub.js"

const KEY = Uint8Array.from(randomBytes(32))

/** The failure of a decrypt, or undefined when it succeeded. */
const refusal = (effect: Effect.Effect<string, CipherError>) => Effect.runSync(Effect.option(Effect.flip(effect)))

describe("the cipher", () => {
  const cipher = makeCipher(KEY)
  const slot = SecretSlot.webhookSecret("whk_a")

  it("a secret decrypts in its own slot only: another row or another column fails", () => {
    const stored = cipher.encrypt("whsec_secret", slot)
    expect(stored).toMatch(/^v2:[A-Za-z0-9+/]+=*$/)
    expect(stored).not.toContain("whsec_secret")
    expect(Effect.runSync(cipher.decrypt(stored, slot))).toBe("whsec_secret")
    for (
      const elsewhere of [
        SecretSlot.webhookSecret("whk_b"),
        SecretSlot.webhookPreviousSecret("whk_a"),
        SecretSlot.instanceAccessToken("whk_a")
      ]
    ) {
      expect(Option.getOrUndefined(refusal(cipher.decrypt(stored, elsewhere)))).toBeInstanceOf(CipherError)
    }
    // Another key fails too; the message names the place, never the secret.
    const wrongKey = refusal(makeCipher(Uint8Array.from(randomBytes(32))).decrypt(stored, slot))
    expect(Option.map(wrongKey, (e) => e.message)).toEqual(
      Option.some(
        "Cannot decrypt the secret in webhooks.secret_encrypted of whk_a: wrong HUB_SECRET_KEY, or not written for this row?"
      )
    )
  })

  it("a truncated tag, a changed byte, the old format and malformed text all fail", () => {
    const empty = Buffer.from(cipher.encrypt("", slot).slice(3), "base64")
    expect(empty.length).toBe(12 + 16)
    // GCM checks only as many tag bytes as it is given: Node takes 4 to 16 unless told the length (Bun
    // refuses short ones itself); the cipher checks the length and tells the decipher, on either runtime.
    const truncated = `v2:${empty.subarray(0, 12 + 8).toString("base64")}`
    const raw = Buffer.from(cipher.encrypt("whsec_secret", slot).slice(3), "base64")
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1
    const flipped = `v2:${raw.toString("base64")}`
    for (
      const stored of [
        truncated,
        flipped,
        "v2:",
        "v2:!!!not base64!!!",
        "whsec_secret",
        legacyEncrypt(KEY, "whsec_secret")
      ]
    ) {
      expect(Option.isSome(refusal(cipher.decrypt(stored, slot))), stored).toBe(true)
    }
  })
})

/** The format written before secrets were bound to their rows: `v1:` + base64(IV | tag | body), no associated data. */
const legacyEncrypt = (key: Uint8Array, plaintext: string) => {
  const iv = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", key, iv)
  const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()])
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64")}`
}

describe("upgrading secrets stored before this release", () => {
  it.live("old-format rows are re-encrypted for their row at start, in one pass, and still decrypt", () =>
    Effect.gen(function*() {
      const file = join(mkdtempSync(join(tmpdir(), "hub-secrets-")), "hub.sqlite")
      const config = hubConfigWith({ databaseFile: file, secretKey: Option.some(Redacted.make(KEY)) })
      const database = Layer.provideMerge(sqliteLayer(file), config)
      const now = new Date().toISOString()
      const otherKey = Uint8Array.from(randomBytes(32))
      // A database as a release before this one left it.
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`INSERT INTO organizations ${sql.insert({ id: "org_old", name: "Old", created_at: now })}`
        yield* sql`INSERT INTO instances ${
          sql.insert([
            {
              id: "ins_old",
              organization_id: "org_old",
              name: "Old",
              phone_number_id: "111",
              waba_id: "222",
              access_token_encrypted: legacyEncrypt(KEY, "EAAG-old-token"),
              created_at: now
            },
            {
              id: "ins_none",
              organization_id: "org_old",
              name: "None",
              phone_number_id: "112",
              waba_id: "222",
              access_token_encrypted: null,
              created_at: now
            },
            {
              id: "ins_lost",
              organization_id: "org_old",
              name: "Lost",
              phone_number_id: "113",
              waba_id: "222",
              access_token_encrypted: legacyEncrypt(otherKey, "EAAG-lost"),
              created_at: now
            }
          ])
        }`
        yield* sql`INSERT INTO webhooks ${
          sql.insert({
            id: "whk_old",
            organization_id: "org_old",
            instance_id: "ins_old",
            name: "old",
            url: "https://example.com/hook",
            secret_encrypted: legacyEncrypt(KEY, "whsec_current"),
            previous_secret_encrypted: legacyEncrypt(KEY, "whsec_previous"),
            previous_secret_expires_at: now,
            active: 1,
            created_at: now,
            updated_at: now
          })
        }`
      }).pipe(Effect.provide(database))

      const warnings: Array<string> = []
      const collectWarnings = Logger.replace(
        Logger.defaultLogger,
        Logger.make(({ message }) => warnings.push(JSON.stringify(message)))
      )
      const started = InstancesRepoLive.pipe(
        Layer.provideMerge(SecretCipher.Default),
        Layer.provideMerge(database),
        Layer.provide(collectWarnings)
      )
      const stored = Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.all({
          instances: sql<
            { readonly id: string; readonly access_token_encrypted: string | null }
          >`SELECT id, access_token_encrypted FROM instances ORDER BY id`,
          webhook: sql<
            { readonly secret_encrypted: string; readonly previous_secret_encrypted: string }
          >`SELECT secret_encrypted, previous_secret_encrypted FROM webhooks`
        }))
      const first = yield* Effect.gen(function*() {
        const cipher = yield* SecretCipher
        const instances = yield* InstancesRepo
        const after = yield* stored
        const [webhook] = after.webhook
        expect(webhook?.secret_encrypted).toMatch(/^v2:/)
        expect(webhook?.previous_secret_encrypted).toMatch(/^v2:/)
        expect(yield* cipher.decrypt(webhook?.secret_encrypted ?? "", SecretSlot.webhookSecret("whk_old"))).toBe(
          "whsec_current"
        )
        expect(
          yield* cipher.decrypt(webhook?.previous_secret_encrypted ?? "", SecretSlot.webhookPreviousSecret("whk_old"))
        ).toBe("whsec_previous")
        expect(yield* instances.accessToken(InstanceId.make("ins_old"))).toEqual(Option.some("EAAG-old-token"))
        expect(yield* instances.accessToken(InstanceId.make("ins_none"))).toEqual(Option.none())
        return after
      }).pipe(Effect.provide(started))
      const byId = Object.fromEntries(first.instances.map((row) => [row.id, row.access_token_encrypted]))
      expect(byId.ins_old).toMatch(/^v2:/)
      expect(byId.ins_none).toBeNull()
      // A row the key cannot open is left as it was (it fails when used, as it did before).
      expect(byId.ins_lost).toMatch(/^v1:/)
      expect(warnings).toEqual([expect.stringContaining("instances.access_token_encrypted of ins_lost")])

      // A second start finds nothing to do: the stored text is unchanged.
      const second = yield* Effect.provide(stored, started)
      expect(second).toEqual(first)
    }))
})

layer(testHub(), { excludeTestServices: true })("secrets through the hub", (it) => {
  it.effect("an access token copied into another instance's row does not decrypt there", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const instances = yield* InstancesRepo
      const victim = yield* seedTenant({ accessToken: "EAAG-victim" })
      const thief = yield* seedTenant({ accessToken: "EAAG-thief" })
      expect(yield* instances.accessToken(victim.instanceId)).toEqual(Option.some("EAAG-victim"))
      yield* sql`UPDATE instances SET access_token_encrypted = (SELECT access_token_encrypted FROM instances WHERE id = ${victim.instanceId})
        WHERE id = ${thief.instanceId}`
      const exit = yield* Effect.exit(instances.accessToken(thief.instanceId))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(JSON.stringify(exit)).not.toContain("EAAG-victim")
    }))
})

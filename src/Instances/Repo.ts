/** SQL for organizations and their instances (tenancy). */
import { SqlClient } from "@effect/sql"
import { Context, Data, Effect, Layer, Option, Schema } from "effect"
import { InstanceId, newId, nowIso, OrganizationId } from "../Domain/Ids.js"
import type { InstanceRef } from "../Domain/Principal.js"
import { countRows, decodeRows } from "../Sql/RowSchemas.js"
import { SecretCipher, SecretSlot } from "../Sql/SecretCipher.js"

export interface OrganizationRow {
  readonly id: OrganizationId
  readonly name: string
  readonly created_at: string
}

export interface InstanceRow {
  readonly id: InstanceId
  readonly organization_id: OrganizationId
  readonly name: string
  readonly phone_number_id: string
  readonly waba_id: string
  /** Whether MARKETING templates go to the Marketing Messages API (Templates/Categories.ts). */
  readonly marketing_messages: MarketingMessages
  readonly created_at: string
}

/** `auto`: a MARKETING template goes to `/marketing_messages`; `off`: every send to `/messages`. */
export const marketingMessagesModes = ["auto", "off"] as const
export type MarketingMessages = (typeof marketingMessagesModes)[number]

export class TenancyConflict extends Data.TaggedError("TenancyConflict")<{ readonly message: string }> {}

export const toInstanceRef = (row: InstanceRow): InstanceRef => ({
  id: row.id,
  organizationId: row.organization_id,
  phoneNumberId: row.phone_number_id,
  wabaId: row.waba_id
})

const instanceColumns = "id, organization_id, name, phone_number_id, waba_id, marketing_messages, created_at"

const organizationRows = decodeRows(
  Schema.Struct({ id: OrganizationId, name: Schema.String, created_at: Schema.String })
)
const instanceRows = decodeRows(Schema.Struct({
  id: InstanceId,
  organization_id: OrganizationId,
  name: Schema.String,
  phone_number_id: Schema.String,
  waba_id: Schema.String,
  marketing_messages: Schema.Literal(...marketingMessagesModes),
  created_at: Schema.String
}))

export class InstancesRepo extends Context.Tag("InstancesRepo")<InstancesRepo, {
  readonly createOrganization: (name: string) => Effect.Effect<OrganizationRow>
  readonly findOrganization: (id: string) => Effect.Effect<Option.Option<OrganizationRow>>
  readonly countOrganizations: Effect.Effect<number>
  /** Every organization, oldest first (the operator's `org list`). */
  readonly listOrganizations: Effect.Effect<ReadonlyArray<OrganizationRow>>
  /** Every instance of every organization (the operator's `instance list`). */
  readonly listInstances: Effect.Effect<ReadonlyArray<InstanceRow>>
  readonly createInstance: (input: {
    readonly organizationId: OrganizationId
    readonly name: string
    readonly phoneNumberId: string
    readonly wabaId: string
    readonly accessToken: Option.Option<string>
    /** `off` unless given. */
    readonly marketingMessages?: MarketingMessages
  }) => Effect.Effect<InstanceRow, TenancyConflict>
  /** Changes an instance's settings; none when it does not exist. */
  readonly updateInstance: (
    id: string,
    settings: { readonly marketingMessages: MarketingMessages }
  ) => Effect.Effect<Option.Option<InstanceRow>>
  readonly listByOrganization: (organizationId: OrganizationId) => Effect.Effect<ReadonlyArray<InstanceRow>>
  readonly findById: (id: string) => Effect.Effect<Option.Option<InstanceRow>>
  readonly findByPhoneNumberId: (phoneNumberId: string) => Effect.Effect<Option.Option<InstanceRow>>
  /** The decrypted upstream access token of an instance, if one was stored. */
  readonly accessToken: (id: InstanceId) => Effect.Effect<Option.Option<string>>
}>() {}

export const InstancesRepoLive = Layer.effect(
  InstancesRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const cipher = yield* SecretCipher

    const findById = (id: string) =>
      instanceRows(sql`SELECT ${sql.literal(instanceColumns)} FROM instances WHERE id = ${id}`).pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie
      )

    return InstancesRepo.of({
      createOrganization: (name) => {
        const row: OrganizationRow = { id: OrganizationId.make(newId("org")), name, created_at: nowIso() }
        return sql`INSERT INTO organizations ${sql.insert({ ...row })}`.pipe(Effect.as(row), Effect.orDie)
      },
      findOrganization: (id) =>
        organizationRows(sql`SELECT id, name, created_at FROM organizations WHERE id = ${id}`).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0])),
          Effect.orDie
        ),
      countOrganizations: countRows(sql`SELECT COUNT(*) AS n FROM organizations`).pipe(
        Effect.map((rows) => rows[0]?.n ?? 0),
        Effect.orDie
      ),
      listOrganizations: organizationRows(sql`SELECT id, name, created_at FROM organizations ORDER BY created_at, id`)
        .pipe(Effect.orDie),
      listInstances: instanceRows(sql`SELECT ${sql.literal(instanceColumns)} FROM instances ORDER BY created_at, id`)
        .pipe(Effect.orDie),
      createInstance: (input) =>
        Effect.gen(function*() {
          const taken = yield* sql<{ readonly organization_id: string; readonly phone_number_id: string }>`
            SELECT organization_id, phone_number_id FROM instances
            WHERE phone_number_id = ${input.phoneNumberId} OR waba_id = ${input.wabaId}`
          if (taken.some((row) => row.phone_number_id === input.phoneNumberId)) {
            return yield* new TenancyConflict({
              message: `phone number id ${input.phoneNumberId} is already bound to an instance`
            })
          }
          if (taken.some((row) => row.organization_id !== input.organizationId)) {
            return yield* new TenancyConflict({
              message: `business account ${input.wabaId} belongs to another organization`
            })
          }
          const row: InstanceRow = {
            id: InstanceId.make(newId("ins")),
            organization_id: input.organizationId,
            name: input.name,
            phone_number_id: input.phoneNumberId,
            waba_id: input.wabaId,
            marketing_messages: input.marketingMessages ?? "off",
            created_at: nowIso()
          }
          yield* sql`INSERT INTO instances ${
            sql.insert({
              ...row,
              access_token_encrypted: Option.getOrNull(
                Option.map(input.accessToken, (token) => cipher.encrypt(token, SecretSlot.instanceAccessToken(row.id)))
              )
            })
          }`
          return row
        }).pipe(sql.withTransaction, Effect.catchTag("SqlError", Effect.die)),
      listByOrganization: (organizationId) =>
        instanceRows(sql`SELECT ${sql.literal(instanceColumns)} FROM instances
          WHERE organization_id = ${organizationId} ORDER BY created_at, id`).pipe(Effect.orDie),
      updateInstance: (id, settings) =>
        sql`UPDATE instances SET marketing_messages = ${settings.marketingMessages} WHERE id = ${id}`.pipe(
          Effect.orDie,
          Effect.zipRight(findById(id))
        ),
      findById,
      findByPhoneNumberId: (phoneNumberId) =>
        instanceRows(
          sql`SELECT ${sql.literal(instanceColumns)} FROM instances WHERE phone_number_id = ${phoneNumberId}`
        ).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0])),
          Effect.orDie
        ),
      accessToken: (id) =>
        sql<{ readonly access_token_encrypted: string | null }>`
          SELECT access_token_encrypted FROM instances WHERE id = ${id}`.pipe(
          Effect.orDie,
          Effect.flatMap((rows) => {
            const stored = rows[0]?.access_token_encrypted
            return stored == null
              ? Effect.succeedNone
              : Effect.asSome(Effect.orDie(cipher.decrypt(stored, SecretSlot.instanceAccessToken(id))))
          })
        )
    })
  })
)

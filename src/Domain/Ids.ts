/** Branded identifiers shared by features. Hub ids are a short prefix plus a time-ordered UUID. */
import { Schema } from "effect"

export const OrganizationId = Schema.String.pipe(Schema.brand("OrganizationId"))
export type OrganizationId = typeof OrganizationId.Type

export const InstanceId = Schema.String.pipe(Schema.brand("InstanceId"))
export type InstanceId = typeof InstanceId.Type

export const ApiTokenId = Schema.String.pipe(Schema.brand("ApiTokenId"))
export type ApiTokenId = typeof ApiTokenId.Type

export const SessionId = Schema.String.pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type

/** Upstream (Graph) identifiers are numeric strings. */
export const GraphId = Schema.String.pipe(
  Schema.pattern(/^\d{1,32}$/, { message: () => "must be a numeric Graph id (digits only)" })
)

/** A new id such as `ins_01933b6e-…`; time-ordered so primary-key inserts stay append-only. */
export const newId = (prefix: string): string => `${prefix}_${Bun.randomUUIDv7()}`

export const nowIso = (): string => new Date().toISOString()

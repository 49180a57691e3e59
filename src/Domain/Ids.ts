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

/**
 * The smallest id `newId(prefix)` can make at `atMillis`: a UUIDv7 starts with its millisecond time,
 * so ids below this one were all made earlier, and time ranges are primary-key ranges.
 */
export const idFloor = (prefix: string, atMillis: number): string => {
  const time = Math.max(0, Math.floor(atMillis)).toString(16).padStart(12, "0")
  return `${prefix}_${time.slice(0, 8)}-${time.slice(8)}`
}

/** Checks that an unknown value (typically from JSON.parse) is JSON, so it can be typed as such. */
import type { Json, JsonObject } from "./Upstream.js"

export const isJson = (u: unknown): u is Json => {
  if (u === null || typeof u === "string" || typeof u === "boolean") return true
  if (typeof u === "number") return Number.isFinite(u)
  if (Array.isArray(u)) return u.every(isJson)
  if (typeof u === "object") return Object.values(u).every(isJson)
  return false
}

export const isJsonObject = (u: unknown): u is JsonObject => typeof u === "object" && u !== null && !Array.isArray(u) && isJson(u)

/** Parses text as a JSON object; anything else (invalid JSON, an array, a scalar) is undefined. */
export const parseJsonObject = (text: string): JsonObject | undefined => {
  try {
    const parsed: unknown = JSON.parse(text)
    return isJsonObject(parsed) ? parsed : undefined
  } catch {
    return undefined
  }
}

/**
 * The upstream's times: Unix seconds, written as a string of digits or a number (`timestamp`). What
 * the upstream sends is not trusted to be sane: a time out of range (`"99999999999999"` would make
 * Date throw, and fail the whole group of posts it is written with) or far ahead is not used.
 */
import type { Json } from "./Json.js"

/** How far ahead of its receipt an upstream time may be (clocks differ); beyond it, it is not believed. */
const AHEAD_MS = 24 * 60 * 60 * 1000

/** Unix seconds as milliseconds, when they are a sane time of the past or near future; undefined otherwise. */
const upstreamMillis = (value: Json | undefined, receivedAtMs: number): number | undefined => {
  const seconds = typeof value === "string" && /^\d{1,12}$/.test(value)
    ? Number(value)
    : typeof value === "number"
    ? value
    : Number.NaN
  const millis = seconds * 1000
  return Number.isFinite(millis) && millis > 0 && millis <= receivedAtMs + AHEAD_MS ? millis : undefined
}

/** Unix seconds to ISO 8601; the receipt time (ISO 8601) when absent, odd or out of range. */
export const isoFromUnix = (value: Json | undefined, receivedAt: string): string => {
  const millis = upstreamMillis(value, Date.parse(receivedAt))
  return millis === undefined ? receivedAt : new Date(millis).toISOString()
}

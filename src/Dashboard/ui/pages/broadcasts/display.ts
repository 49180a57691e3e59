/** How the broadcasts' pages show things: counts, a status's tone and a time in words. */
import type { Tone } from "../../components.js"
import type { Broadcast } from "../../types.js"

export const numbers = new Intl.NumberFormat("en")

export const broadcastTone = (status: Broadcast["status"]): Tone =>
  status === "sending" ? "info" : status === "completed" ? "ok" : status === "cancelled" ? "neutral" : "warn"

/** How long, in words: "45 s", "3 min", "2 h 5 min". */
export const duration = (seconds: number) => {
  const s = Math.round(seconds)
  if (s < 60) return `${s} s`
  if (s < 3600) return `${Math.floor(s / 60)} min`
  const minutes = Math.floor((s % 3600) / 60)
  return `${Math.floor(s / 3600)} h${minutes === 0 ? "" : ` ${minutes} min`}`
}

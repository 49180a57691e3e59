/** Ids in the upstream's real formats, and stable values derived from an instance's ids. */
import { createHash, randomBytes, randomInt } from "node:crypto"

/** A numeric id string like Graph's media, template and flow ids (15 or 16 digits, no leading zero). */
export const numericId = (length = 16) =>
  String(randomInt(1, 10)) + Array.from({ length: length - 1 }, () => randomInt(0, 10)).join("")

/** `wamid.` + base64 of the framing the real ids use around the recipient's number. */
export const wamid = (waId: string) => {
  const number = Buffer.from(waId.slice(0, 20), "ascii")
  const tail = Buffer.from(randomBytes(9).toString("hex").toUpperCase(), "ascii")
  return `wamid.${
    Buffer.concat([
      Buffer.from([0x1c, 0x18, number.length]),
      number,
      Buffer.from([0x15, 0x02, 0x00, 0x11, 0x18, tail.length]),
      tail,
      Buffer.from([0x00])
    ]).toString("base64")
  }`
}

export const wacid = () => `wacid.${randomBytes(24).toString("base64url")}`

const QR_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

/** A 14-character [A-Z0-9] QR code, derived from the seed so it is stable for a phone number. */
export const qrCode = (seed: string) => {
  const hash = createHash("sha256").update(seed).digest()
  return Array.from({ length: 14 }, (_, i) => QR_ALPHABET[(hash[i] ?? 0) % QR_ALPHABET.length]).join("")
}

/** A numeric id derived from a seed (stable seeded flow ids and the like). */
export const stableNumericId = (seed: string, length = 16) => {
  const hash = createHash("sha256").update(seed).digest()
  return String(1 + ((hash[0] ?? 0) % 9)) +
    Array.from({ length: length - 1 }, (_, i) => (hash[i + 1] ?? 0) % 10).join("")
}

export const hex = (bytes: number) => randomBytes(bytes).toString("hex")

/** The display number the sandbox gives a phone number id: a +1 555 test number from its last digits. */
export const displayDigits = (phoneNumberId: string) =>
  `1555${phoneNumberId.replace(/\D/g, "").slice(-7).padStart(7, "0")}`

export const formattedDisplayNumber = (phoneNumberId: string) => {
  const d = displayDigits(phoneNumberId)
  return `+1 ${d.slice(1, 4)}-${d.slice(4, 7)}-${d.slice(7)}`
}

export const sha256Hex = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

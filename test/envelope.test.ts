/**
 * A change's dedupe key (Envelope.ts): equal for the same change however its JSON is written,
 * different for another change or another instance, and ordered by the change's own time so that
 * new keys land at the end of the dedupe index.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { Json } from "../src/Domain/Json.js"
import { dedupeKey, envelopeFor, parseEnvelope, type UpstreamChange } from "../src/UpstreamEvents/Envelope.js"

/** The one change of an upstream payload carrying `value`. */
const changeOf = (value: Json, field = "messages"): UpstreamChange => {
  const parsed = parseEnvelope({
    object: "whatsapp_business_account",
    entry: [{ id: "waba", changes: [{ field, value }] }]
  })
  if (Either.isLeft(parsed) || parsed.right.changes[0] === undefined) throw new Error("the test's payload must parse")
  return parsed.right.changes[0]
}

const status = (id: string, timestamp: string | number) => ({
  id,
  status: "delivered",
  timestamp,
  recipient_id: "1555"
})

describe("dedupe keys", () => {
  it("the same change gives the same key, whatever the order of its JSON; another change, field or instance another", () => {
    const key = dedupeKey("ins_1", changeOf({ statuses: [status("wamid.A", "1763700000")] }))
    const reordered = dedupeKey(
      "ins_1",
      changeOf({ statuses: [{ recipient_id: "1555", timestamp: "1763700000", status: "delivered", id: "wamid.A" }] })
    )
    expect(reordered).toBe(key)
    expect(dedupeKey("ins_2", changeOf({ statuses: [status("wamid.A", "1763700000")] }))).not.toBe(key)
    expect(dedupeKey("ins_1", changeOf({ statuses: [status("wamid.B", "1763700000")] }))).not.toBe(key)
    expect(dedupeKey("ins_1", changeOf({ statuses: [status("wamid.A", "1763700000")] }, "other"))).not.toBe(key)
    // The time, the separator and 22 base64url characters (132 bits) of the identity's SHA-256.
    expect(key).toMatch(/^1763700000\.[A-Za-z0-9_-]{22}$/)
  })

  it("keys start with the change's earliest item time, so later changes sort after earlier ones", () => {
    const earlier = dedupeKey("ins_1", changeOf({ statuses: [status("wamid.Z", "999999999")] }))
    const later = dedupeKey("ins_1", changeOf({ statuses: [status("wamid.A", "1000000000")] }))
    expect(earlier.startsWith("0999999999.")).toBe(true)
    expect(earlier < later).toBe(true)
    const mixed = changeOf({
      messages: [{ id: "wamid.M", timestamp: 1763700009, type: "text" }],
      statuses: [status("wamid.S", "1763700005"), status("wamid.T", "1763700007")]
    })
    expect(dedupeKey("ins_1", mixed).slice(0, 11)).toBe("1763700005.")
  })

  it("a change without a usable time (an account update, a malformed timestamp) keys from the start", () => {
    expect(dedupeKey("ins_1", changeOf({ event: "VERIFIED_ACCOUNT" }, "account_update")).slice(0, 11)).toBe(
      "0000000000."
    )
    expect(dedupeKey("ins_1", changeOf({ statuses: [status("wamid.A", "soon")] })).slice(0, 11)).toBe("0000000000.")
    expect(dedupeKey("ins_1", changeOf({ statuses: [status("wamid.A", "12345678901")] })).slice(0, 11)).toBe(
      "0000000000."
    )
  })
})

describe("an instance's envelope", () => {
  it("is the upstream's own, every field and key order kept, holding only that instance's changes and the entries that hold them", () => {
    const mine = { field: "messages", value: { metadata: { phone_number_id: "1" }, statuses: [] } }
    const theirs = { field: "messages", value: { metadata: { phone_number_id: "2" }, statuses: [] } }
    const later = { value: { event: "APPROVED" }, field: "message_template_status_update" }
    const payload = {
      entry: [
        { id: "waba", time: 1751247548, changes: [mine, theirs], extra: { kept: true } },
        { id: "other", time: 1751247549, changes: [theirs] },
        { changes: [later], id: "waba", time: 1751247550 }
      ],
      object: "whatsapp_business_account",
      note: "kept"
    }
    const parsed = parseEnvelope(payload)
    if (Either.isLeft(parsed)) throw new Error("the test's payload must parse")
    const changes = parsed.right.changes.filter((c) => c.phoneNumberId !== "2")
    expect(envelopeFor(parsed.right.object, changes)).toBe(JSON.stringify({
      entry: [
        { id: "waba", time: 1751247548, changes: [mine], extra: { kept: true } },
        { changes: [later], id: "waba", time: 1751247550 }
      ],
      object: "whatsapp_business_account",
      note: "kept"
    }))
    // An upstream envelope without `object` gets the one it stands for.
    const bare = parseEnvelope({ entry: [{ id: "waba", changes: [mine] }] })
    if (Either.isLeft(bare)) throw new Error("the test's payload must parse")
    expect(JSON.parse(envelopeFor(bare.right.object, bare.right.changes))).toEqual({
      object: "whatsapp_business_account",
      entry: [{ id: "waba", changes: [mine] }]
    })
  })
})

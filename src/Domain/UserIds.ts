/**
 * How the hub names a WhatsApp user: their number (wa_id digits) or, since 2026, their business-scoped
 * user id (BSUID, `US.13491208655302741918`) or parent BSUID (`US.ENT.…`), which a username user may
 * be known by alone. A BSUID is kept verbatim: never case-folded, never through a phone normaliser.
 */
import { Schema } from "effect"

/** A business-scoped user id or parent id, as Meta writes it. */
export const BSUID = /^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,128}$/

const BSUID_RULE = "must be a business-scoped user id such as US.13491208655302741918 (or a parent id US.ENT.…)"

export const isBusinessScopedUserId = (text: string) => BSUID.test(text)

export const BusinessScopedUserId = Schema.String.pipe(Schema.filter((id) => BSUID.test(id) || BSUID_RULE))

/** A user's number as a caller may write it: country code and number, 6 to 15 digits, a leading "+" allowed. */
export const USER_NUMBER = /^\+?\d{6,15}$/

/**
 * A user by either identifier: a number (a leading "+" is dropped) or a BSUID (kept as given).
 * Anything else is refused with the rule for both.
 */
export const UserIdentifier = Schema.transform(
  Schema.String.pipe(Schema.filter((text) =>
    USER_NUMBER.test(text) || BSUID.test(text) ||
    "must be a number in wa_id form (country code and number, digits) or a business-scoped user id such as US.13491208655302741918"
  )),
  Schema.String,
  { strict: true, decode: (text) => (text.startsWith("+") ? text.slice(1) : text), encode: (text) => text }
)

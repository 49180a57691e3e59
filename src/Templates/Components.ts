/**
 * The rules of a template's components (the spec's shapes and Meta's constraints), checked as a
 * whole because they depend on each other and on the category. Each problem names the component
 * by its index, e.g. `components.1.text`, and the rule it breaks.
 */
import type { Schema } from "effect"
import { isRecord } from "../Domain/Json.js"

type Issue = Schema.FilterIssue
type Obj = Readonly<Record<string, unknown>>

const upper = (u: unknown) => (typeof u === "string" ? u.toUpperCase() : "")
const isStringArray = (u: unknown): u is ReadonlyArray<string> =>
  Array.isArray(u) && u.every((s) => typeof s === "string")

const PLACEHOLDER = /\{\{([^{}]*)\}\}/g

/** The placeholders of a text: numbers, or `undefined` for one that is not a number. */
const placeholders = (text: string): ReadonlyArray<number | undefined> =>
  Array.from(text.matchAll(PLACEHOLDER), (m) => (/^\s*\d+\s*$/.test(m[1] ?? "") ? Number(m[1]) : undefined))

const MEDIA_FORMATS = new Set(["IMAGE", "VIDEO", "DOCUMENT"])
const HEADER_FORMATS = new Set(["TEXT", "IMAGE", "VIDEO", "DOCUMENT", "LOCATION"])
const BUTTON_TYPES = new Set(["URL", "QUICK_REPLY", "PHONE_NUMBER", "OTP", "COPY_CODE", "FLOW", "CATALOG", "MPM"])
const OTP_TYPES = new Set(["COPY_CODE", "ONE_TAP", "ZERO_TAP"])

/** Where in the request a rule is checked; problems are collected, not thrown. */
class At {
  constructor(readonly issues: Array<Issue>, readonly path: ReadonlyArray<PropertyKey>) {}
  at(...more: ReadonlyArray<PropertyKey>) {
    return new At(this.issues, [...this.path, ...more])
  }
  fail(message: string, ...more: ReadonlyArray<PropertyKey>) {
    this.issues.push({ path: [...this.path, ...more], message })
  }
  /** A required text of at most `max` characters; answers it when valid. */
  text(value: unknown, key: string, max: number): string | undefined {
    if (typeof value !== "string" || value.trim() === "") {
      this.fail("is required and must be a non-empty string", key)
      return undefined
    }
    if (value.length > max) this.fail(`must be at most ${max} characters`, key)
    return value
  }
}

const checkHeader = (at: At, header: Obj, authentication: boolean) => {
  const format = upper(header.format)
  if (!HEADER_FORMATS.has(format)) return at.fail("must be one of TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION", "format")
  if (format === "TEXT") {
    const text = at.text(header.text, "text", 60)
    if (text === undefined) return
    const found = placeholders(text)
    if (found.length > 1 || found.some((n) => n !== 1)) {
      at.fail("may hold at most one placeholder, written {{1}}", "text")
    }
    const example = isRecord(header.example) ? header.example.header_text : undefined
    if (example !== undefined && (!isStringArray(example) || example.length !== found.length)) {
      at.fail(`must be an array of ${found.length} string(s), one per placeholder`, "example", "header_text")
    }
    return
  }
  if (MEDIA_FORMATS.has(format)) {
    if (authentication) return at.fail("an AUTHENTICATION template cannot have a media header", "format")
    const handles = isRecord(header.example) ? header.example.header_handle : undefined
    if (!isStringArray(handles) || handles.length === 0) {
      at.fail(
        `a header of format ${format} needs an example media handle (example.header_handle: [<handle>])`,
        "example",
        "header_handle"
      )
    }
  }
}

const checkBody = (at: At, body: Obj, authentication: boolean) => {
  if (authentication) {
    if (body.text !== undefined) at.fail("an AUTHENTICATION body has no text (the upstream supplies it)", "text")
    if (body.add_security_recommendation !== undefined && typeof body.add_security_recommendation !== "boolean") {
      at.fail("must be a boolean", "add_security_recommendation")
    }
    return
  }
  const text = at.text(body.text, "text", 1024)
  if (text === undefined) return
  const found = placeholders(text)
  if (found.some((n) => n === undefined)) return at.fail("placeholders must be numbered, like {{1}}", "text")
  const numbers = [...new Set(found)].sort((a, b) => (a ?? 0) - (b ?? 0))
  if (numbers.some((n, i) => n !== i + 1)) {
    return at.fail(
      `placeholders must be numbered {{1}} to {{${numbers.length}}} without gaps; found ${
        numbers.map((n) => `{{${n}}}`).join(", ")
      }`,
      "text"
    )
  }
  const example = isRecord(body.example) ? body.example.body_text : undefined
  if (body.example !== undefined && example === undefined) return at.fail("must be an object with body_text", "example")
  if (example === undefined) return
  const first: unknown = Array.isArray(example) ? example[0] : undefined
  if (!isStringArray(first) || first.length !== numbers.length) {
    at.fail(`must be [[...]] holding exactly ${numbers.length} string(s), one per placeholder`, "example", "body_text")
  }
}

const checkFooter = (at: At, footer: Obj, authentication: boolean) => {
  if (authentication && footer.text === undefined) {
    const minutes = footer.code_expiration_minutes
    if (minutes !== undefined && !(Number.isInteger(minutes) && Number(minutes) >= 1 && Number(minutes) <= 90)) {
      at.fail("must be a whole number of minutes from 1 to 90", "code_expiration_minutes")
    }
    return
  }
  at.text(footer.text, "text", 60)
}

const checkUrlButton = (at: At, button: Obj) => {
  if (typeof button.url !== "string" || !/^https?:\/\/[^\s]+$/.test(button.url)) {
    return at.fail("is required and must be an http(s) URL", "url")
  }
  const found = placeholders(button.url)
  if (found.length === 0) return
  if (found.length > 1 || found[0] !== 1 || !button.url.endsWith("{{1}}")) {
    return at.fail("may hold one placeholder, {{1}}, at its end", "url")
  }
  if (!isStringArray(button.example) || button.example.length !== 1) {
    at.fail("a URL with {{1}} needs an example: an array of one string", "example")
  }
}

const checkButtons = (at: At, component: Obj, authentication: boolean) => {
  const buttons = component.buttons
  if (!Array.isArray(buttons) || buttons.length === 0) return at.fail("must be a non-empty array", "buttons")
  if (buttons.length > 10) at.fail("must hold at most 10 buttons", "buttons")
  buttons.forEach((button: unknown, i) => {
    const b = at.at("buttons", i)
    if (!isRecord(button)) return b.fail("must be an object")
    const type = upper(button.type)
    if (!BUTTON_TYPES.has(type)) return b.fail(`must be one of ${[...BUTTON_TYPES].join(", ")}`, "type")
    if (type === "OTP") {
      if (!authentication) b.fail("OTP buttons belong to AUTHENTICATION templates", "type")
      if (!OTP_TYPES.has(upper(button.otp_type))) b.fail("must be COPY_CODE, ONE_TAP or ZERO_TAP", "otp_type")
      if (button.text !== undefined) b.text(button.text, "text", 25)
      return
    }
    if (authentication) return b.fail("an AUTHENTICATION template has exactly one OTP button", "type")
    b.text(button.text, "text", 25)
    if (type === "URL") checkUrlButton(b, button)
    if (
      type === "PHONE_NUMBER" && (typeof button.phone_number !== "string" || !/^\+?\d{5,20}$/.test(button.phone_number))
    ) {
      b.fail("is required: the number in international form, digits only", "phone_number")
    }
  })
  if (authentication && buttons.length !== 1) {
    at.fail("an AUTHENTICATION template has exactly one OTP button", "buttons")
  }
}

const checkers: Readonly<Record<string, (at: At, component: Obj, authentication: boolean) => void>> = {
  HEADER: checkHeader,
  BODY: checkBody,
  FOOTER: checkFooter,
  BUTTONS: checkButtons
}

/** Every problem of the components of a template of the given category (none: they are valid). */
export const componentIssues = (category: string, components: ReadonlyArray<unknown>): ReadonlyArray<Issue> => {
  const root = new At([], ["components"])
  const authentication = category === "AUTHENTICATION"
  const counts = new Map<string, number>()
  components.forEach((component, i) => {
    const at = root.at(i)
    if (!isRecord(component)) return at.fail("must be an object")
    const type = upper(component.type)
    const check = checkers[type]
    if (check === undefined) return at.fail("must be one of HEADER, BODY, FOOTER, BUTTONS", "type")
    counts.set(type, (counts.get(type) ?? 0) + 1)
    if ((counts.get(type) ?? 0) > 1) return at.fail(`a template has at most one ${type} component`, "type")
    check(at, component, authentication)
  })
  if (counts.get("BODY") === undefined) root.fail("a template needs exactly one BODY component")
  if (authentication && counts.get("BUTTONS") === undefined) {
    root.fail("an AUTHENTICATION template needs a BUTTONS component with one OTP button")
  }
  return root.issues
}

/**
 * A broadcast's recipients from a CSV (pasted, or a file's text): one row a person, `to` first (a
 * number, or a business-scoped user id), then one column per body parameter of the template, in the
 * template's order. A first row that names its columns is read as a header and skipped. Commas
 * separate the columns; a paste from a spreadsheet (tabs) and semicolons are read too. Pure: no DOM.
 */
import type { BroadcastRecipient, TemplateRecord } from "./types.js"

/** Recipients one call may add (POST /api/broadcasts and POST /api/broadcasts/{id}/recipients). */
export const RECIPIENTS_PER_CALL = 1_000
/** Recipients one broadcast may hold. */
export const RECIPIENTS_PER_BROADCAST = 100_000

/** A business-scoped user id (src/Domain/UserIds.ts, which the bundle may not import). */
const BSUID = /^[A-Z]{2}\.(ENT\.)?[A-Za-z0-9]{1,128}$/
/** A number as the API takes it: 5 to 20 digits, a leading + allowed. */
const NUMBER = /^\+?\d{5,20}$/

/** The delimiter of a CSV: a tab (a spreadsheet's paste), else a semicolon when the first line has no comma, else a comma. */
const delimiterOf = (text: string) => {
  const first = text.split(/\r?\n/, 1)[0] ?? ""
  if (first.includes("\t")) return "\t"
  if (first.includes(";") && !first.includes(",")) return ";"
  return ","
}

/** The rows of a CSV (RFC 4180: double quotes around a field that holds the delimiter, a quote or a line break). */
const parseCsv = (text: string): ReadonlyArray<ReadonlyArray<string>> => {
  const delimiter = delimiterOf(text)
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (quoted) {
      if (c === "\"") {
        if (text[i + 1] === "\"") {
          field += "\""
          i++
        } else quoted = false
      } else field += c
    } else if (c === "\"" && field === "") quoted = true
    else if (c === delimiter) {
      row.push(field)
      field = ""
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++
      row.push(field)
      rows.push(row)
      row = []
      field = ""
    } else field += c
  }
  if (field !== "" || row.length > 0) {
    row.push(field)
    rows.push(row)
  }
  return rows
}

/** The body parameters a template takes: `{{1}}`, `{{2}}`… in order, or named ones (`{{first_name}}`). */
export interface BodyParameters {
  readonly names: ReadonlyArray<string>
  readonly named: boolean
  /** Parameters the CSV cannot give: a header's or a button's. */
  readonly elsewhere: ReadonlyArray<string>
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const placeholders = (text: unknown) =>
  typeof text === "string" ? [...text.matchAll(/\{\{\s*([A-Za-z0-9_]+)\s*\}\}/g)].map((m) => m[1] ?? "") : []

export const bodyParametersOf = (template: TemplateRecord): BodyParameters => {
  const components = (template.components ?? []).filter(isRecord)
  const typeOf = (c: Record<string, unknown>) => String(c.type ?? "").toUpperCase()
  const body = components.find((c) => typeOf(c) === "BODY")
  const found = [...new Set(placeholders(body?.text))]
  const named = template.parameter_format === "NAMED" || found.some((name) => !/^\d+$/.test(name))
  const names = named ? found : found.sort((a, b) => Number(a) - Number(b))
  const elsewhere: Array<string> = []
  const header = components.find((c) => typeOf(c) === "HEADER")
  if (header !== undefined) {
    const format = String(header.format ?? "TEXT").toUpperCase()
    if (format === "TEXT" ? placeholders(header.text).length > 0 : format !== "LOCATION") {
      elsewhere.push(format === "TEXT" ? "its header's text" : `its ${format.toLowerCase()} header`)
    }
  }
  const buttons = components.find((c) => typeOf(c) === "BUTTONS")
  if (
    Array.isArray(buttons?.buttons) &&
    buttons.buttons.some((b) => isRecord(b) && (placeholders(b.url).length > 0 || b.type === "COPY_CODE"))
  ) elsewhere.push("its buttons")
  return { names, named, elsewhere }
}

interface Problem {
  /** The row's line in the CSV, from 1. */
  readonly line: number
  readonly message: string
}

export interface ReadRecipients {
  readonly recipients: ReadonlyArray<BroadcastRecipient>
  readonly problems: ReadonlyArray<Problem>
  /** Whether the first row was read as the columns' names. */
  readonly header: boolean
  /** The parameters each row gave (the template's when known; else the first row's). */
  readonly parameters: number
}

const HEADER_NAMES = new Set(["to", "recipient", "number", "phone", "wa_id", "user"])

const recipientOf = (cell: string): { readonly to: string } | { readonly recipient: string } | undefined => {
  const text = cell.trim()
  if (BSUID.test(text)) return { recipient: text }
  // A number as people write it: spaces, dashes, dots and brackets between its digits are left out.
  const digits = text.replace(/[\s\-.()]/g, "")
  return NUMBER.test(digits) ? { to: digits } : undefined
}

/** Trailing empty cells (a spreadsheet's export often has them) are not parameters. */
const trimmed = (row: ReadonlyArray<string>) => {
  let end = row.length
  while (end > 0 && (row[end - 1] ?? "").trim() === "") end--
  return row.slice(0, end)
}

/**
 * The recipients of a CSV, with each row's problems. `parameters` are the template's body parameters
 * when known; unknown (a template typed by name), every row must give as many as the first.
 */
export const readRecipients = (text: string, parameters: BodyParameters | undefined): ReadRecipients => {
  const rows = parseCsv(text)
  const recipients: Array<BroadcastRecipient> = []
  const problems: Array<Problem> = []
  const first = rows.findIndex((row) => trimmed(row).length > 0)
  const firstCell = (rows[first]?.[0] ?? "").trim()
  const header = first >= 0 && (HEADER_NAMES.has(firstCell.toLowerCase()) || recipientOf(firstCell) === undefined)
  let expected = parameters?.names.length
  rows.forEach((raw, index) => {
    const line = index + 1
    const row = trimmed(raw)
    if (row.length === 0 || (header && index === first)) return
    const who = recipientOf(row[0] ?? "")
    if (who === undefined) {
      problems.push({
        line,
        message: `“${(row[0] ?? "").trim()}” is neither a number (5 to 20 digits, a leading + allowed) ` +
          "nor a business-scoped user id"
      })
      return
    }
    const values = row.slice(1).map((cell) => cell.trim())
    expected ??= values.length
    if (values.length !== expected) {
      problems.push({
        line,
        message: `${values.length} ${values.length === 1 ? "parameter" : "parameters"}; the template takes ${expected}`
      })
      return
    }
    const empty = values.findIndex((value) => value === "")
    if (empty >= 0) {
      problems.push({ line, message: `parameter ${empty + 1} is empty` })
      return
    }
    const names = parameters?.named === true ? parameters.names : undefined
    recipients.push(
      values.length === 0 ? who : {
        ...who,
        components: [{
          type: "body",
          parameters: values.map((text, i) => ({
            type: "text" as const,
            text,
            ...(names?.[i] === undefined ? {} : { parameter_name: names[i] })
          }))
        }]
      }
    )
  })
  if (recipients.length > RECIPIENTS_PER_BROADCAST) {
    problems.push({
      line: rows.length,
      message: `${recipients.length} recipients: a broadcast holds at most ${RECIPIENTS_PER_BROADCAST}`
    })
  }
  return { recipients, problems, header, parameters: expected ?? 0 }
}

/** The calls that carry the recipients: the first creates the broadcast, each other adds to it. */
export const chunksOf = <A extends unknown>(items: ReadonlyArray<A>, size = RECIPIENTS_PER_CALL) => {
  const chunks: Array<ReadonlyArray<A>> = []
  for (let at = 0; at < items.length; at += size) chunks.push(items.slice(at, at + size))
  return chunks
}

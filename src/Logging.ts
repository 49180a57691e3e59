/**
 * Logging: one line per record, either for people (`pretty`: time, level, message, then the fields
 * as key=value in a stable order, the request id first; an answered request reads
 * `POST /api/messages 200 3.1ms requestId=…`) or for machines (`json`: Effect's structured record).
 * Lines are batched by Effect's own Logger.batched and written together every few milliseconds, so a
 * busy hub does not pay one stdout write per log line; what is pending is written when the hub stops.
 */
import { Cause, Duration, Effect, HashMap, Layer, Logger, LogLevel } from "effect"
import { HubConfig } from "./Config.js"

/** How long lines wait to be written together. */
const BATCH_WINDOW = Duration.millis(10)

/** A logger whose lines are written to stdout in batches. */
const batchedToStdout = (lines: Logger.Logger<unknown, string>) =>
  Logger.batched(lines, BATCH_WINDOW, (batch) => Effect.sync(() => process.stdout.write(`${batch.join("\n")}\n`)))

/**
 * Control characters a logged value may carry (from a request path, a header, an upstream message):
 * C0, DEL, C1 and the two Unicode line separators. Written raw they could forge a log line or drive
 * a terminal (ANSI escapes), so every line writes them as `\uXXXX`.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g

/** Text with every control character written as `\uXXXX`. */
const escapeControl = (text: string): string =>
  text.replace(CONTROL, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`)

/** Effect's structured log record as one JSON line (JSON.stringify leaves DEL, C1 and U+2028/9 raw). */
export const jsonLine = Logger.map(Logger.structuredLogger, (record) => escapeControl(JSON.stringify(record)))

/** A value as a field shows it: bare when it reads unambiguously, JSON otherwise (control characters escaped). */
const show = (value: unknown): string => escapeControl(showRaw(value))

const showRaw = (value: unknown): string => {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
  if (typeof value === "number" || typeof value === "boolean" || value === null || value === undefined) {
    return String(value)
  }
  if (value instanceof Error) return JSON.stringify(value.message)
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

const text = (part: unknown) => (typeof part === "string" ? escapeControl(part) : show(part))

const pad2 = (n: number) => String(n).padStart(2, "0")
const clockTime = (date: Date) =>
  `${pad2(date.getHours())}:${pad2(date.getMinutes())}:${pad2(date.getSeconds())}.${
    String(date.getMilliseconds()).padStart(3, "0")
  }`

const levelColour: Partial<Record<LogLevel.LogLevel["_tag"], string>> = {
  Trace: "90",
  Debug: "34",
  Info: "32",
  Warning: "33",
  Error: "31",
  Fatal: "41;97"
}

/** Fields in a stable order: the request id first, then the others by name. */
const orderedFields = (annotations: HashMap.HashMap<string, unknown>) =>
  [...HashMap.entries(annotations)].sort((
    [a],
    [b]
  ) => (a === "requestId" ? -1 : b === "requestId" ? 1 : a < b ? -1 : a > b ? 1 : 0))

/** One record on one line (see the top of this file); `colour` styles the level for a terminal. */
export const prettyLine = (
  record: {
    readonly date: Date
    readonly logLevel: LogLevel.LogLevel
    readonly message: unknown
    readonly annotations: HashMap.HashMap<string, unknown>
    readonly cause: Cause.Cause<unknown>
  },
  colour: boolean
): string => {
  const level = record.logLevel.label.padEnd(5)
  const parts = [
    `[${clockTime(record.date)}]`,
    colour && levelColour[record.logLevel._tag]
      ? `\u001b[${levelColour[record.logLevel._tag]}m${level}\u001b[0m`
      : level
  ]
  const fields = orderedFields(record.annotations)
  const messages = Array.isArray(record.message) ? record.message : [record.message]
  const field = (name: string) => fields.find(([key]) => key === name)?.[1]
  const method = field("method")
  const path = field("path")
  const status = field("status")
  const duration = field("durationMs")
  if (
    messages[0] === "request" && method !== undefined && path !== undefined && status !== undefined &&
    duration !== undefined
  ) {
    // The access line: what an operator scans for, in the order they read it.
    const shown = new Set(["method", "path", "status", "durationMs"])
    parts.push(`${text(method)} ${text(path)} ${text(status)} ${text(duration)}ms`)
    for (const [key, value] of fields) if (!shown.has(key)) parts.push(`${key}=${show(value)}`)
  } else {
    parts.push(messages.map(text).join(" "))
    for (const [key, value] of fields) parts.push(`${key}=${show(value)}`)
  }
  if (!Cause.isEmpty(record.cause)) {
    parts.push(`cause=${escapeControl(JSON.stringify(Cause.pretty(record.cause, { renderErrorCause: true })))}`)
  }
  return parts.join(" ")
}

/** The pretty logger's line: coloured levels only on a terminal. */
const prettyLogLine = Logger.make((record) => prettyLine(record, process.stdout.isTTY === true))

/** Log format and level from the config; `quiet` keeps stdout for a command's own output (warnings only). */
export const loggingLayer = (quiet: boolean) =>
  Layer.unwrapEffect(
    Effect.map(HubConfig, (config) =>
      Layer.merge(
        Logger.replaceScoped(
          Logger.defaultLogger,
          batchedToStdout(config.logFormat === "json" ? jsonLine : prettyLogLine)
        ),
        Logger.minimumLogLevel(quiet ? LogLevel.Warning : config.logLevel)
      ))
  )

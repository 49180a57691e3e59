/**
 * Logging: Effect's pretty logger for people, or JSON lines for machines. JSON lines are buffered and
 * written once per event-loop turn, so a busy hub does not pay one stdout write per log line.
 */
import { Effect, Layer, Logger, LogLevel } from "effect"
import { HubConfig } from "./Config.js"

const pending: Array<string> = []
let flushScheduled = false

const flush = () => {
  flushScheduled = false
  if (pending.length === 0) return
  process.stdout.write(pending.join(""))
  pending.length = 0
}

process.once("exit", flush)

const writeLine = (line: string) => {
  pending.push(line + "\n")
  if (!flushScheduled) {
    flushScheduled = true
    setImmediate(flush)
  }
}

/** Effect's structured log record as one JSON line. */
export const bufferedJsonLogger = Logger.map(Logger.structuredLogger, (record) => writeLine(JSON.stringify(record)))

/** Log format and level from the config; `quiet` keeps stdout for a command's own output (warnings only). */
export const loggingLayer = (quiet: boolean) =>
  Layer.unwrapEffect(
    Effect.map(HubConfig, (config) =>
      Layer.merge(
        config.logFormat === "json" ? Logger.replace(Logger.defaultLogger, bufferedJsonLogger) : Logger.pretty,
        Logger.minimumLogLevel(quiet ? LogLevel.Warning : config.logLevel)
      ))
  )

/**
 * How the command line fails and what its console prints: every failure, an argument error
 * included, is one JSON line `{"error": "..."}` on stderr and exit status 1; a bad configuration is
 * one such line per bad variable. Help and output are written without terminal styling when stdout
 * is not a terminal.
 */
import { HelpDoc, ValidationError } from "@effect/cli"
import { Cause, ConfigError, Data, Effect } from "effect"

/** An operator command's refusal, said to the operator as it is. */
export class CliError extends Data.TaggedError("CliError")<{ readonly message: string }> {}

/** Terminal styling (help's bold and colours), dropped when the output is not a terminal. */
const ANSI_STYLE = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g")
const plain = (text: string) => text.replace(ANSI_STYLE, "")

/**
 * The command line's console: help and output as @effect/cli writes them, without styling when
 * stdout is not a terminal; its own error printing is dropped, because reportFailure prints every
 * failure, argument errors included, as one JSON line.
 */
export const withCliConsole = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.consoleWith((base) =>
    Effect.withConsole(effect, {
      ...base,
      log: (...args) =>
        base.log(
          ...(process.stdout.isTTY === true ? args : args.map((arg) => (typeof arg === "string" ? plain(arg) : arg)))
        ),
      error: () => Effect.void
    })
  )

const printError = (message: string) =>
  Effect.sync(() => process.stderr.write(`${JSON.stringify({ error: message })}\n`))

/** One message per bad variable of a configuration error. */
const configProblems = (error: ConfigError.ConfigError): ReadonlyArray<string> => {
  switch (error._op) {
    case "And":
    case "Or":
      return [...configProblems(error.left), ...configProblems(error.right)]
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported": {
      const name = error.path.join("_")
      return [error.message.includes(name) ? error.message : `${name}: ${error.message}`]
    }
  }
}

/** An argument error's message on one line, as @effect/cli words it. */
const argumentProblem = (error: ValidationError.ValidationError) =>
  plain(HelpDoc.toAnsiText(error.error)).split("\n").map((line) => line.trim()).filter((line) => line !== "").join(" ")

const exitFailed = Effect.sync(() => process.exit(1))

/** An expected failure (an argument, the configuration, a command's refusal) on stderr, then exit 1. */
export const reportFailure = (error: unknown) =>
  Effect.gen(function*() {
    if (ValidationError.isValidationError(error)) return yield* printError(argumentProblem(error))
    if (ConfigError.isConfigError(error)) {
      for (const problem of new Set(configProblems(error))) yield* printError(`Configuration error: ${problem}`)
      return
    }
    yield* printError(error instanceof CliError ? error.message : String(error))
  }).pipe(Effect.zipRight(exitFailed))

/** A port already taken: the one defect an operator causes, said in one line. */
const portInUse = (defect: unknown) =>
  typeof defect === "object" && defect !== null && "code" in defect && defect.code === "EADDRINUSE"

const reportDefect = (cause: Cause.Cause<unknown>) =>
  Effect.gen(function*() {
    const defect = Cause.squash(cause)
    if (portInUse(defect)) {
      const where = `${process.env.HOST ?? "127.0.0.1"}:${process.env.PORT ?? "3000"}`
      return yield* printError(
        `${where} is already in use: stop whatever listens there, or set PORT (or HOST) to a free one`
      )
    }
    yield* printError(`Unexpected failure: ${defect instanceof Error ? defect.message : String(defect)}`)
  })

/** A defect in one line on stderr, then exit 1; an interruption (a stop signal) ends quietly. */
export const reportCause = (cause: Cause.Cause<unknown>) =>
  Cause.isInterruptedOnly(cause) ? Effect.void : Effect.zipRight(reportDefect(cause), exitFailed)

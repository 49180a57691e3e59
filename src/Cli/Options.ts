/** Options several command groups take, and reading a secret from standard input. */
import { Options, ValidationError } from "@effect/cli"
import { Effect } from "effect"
import { text } from "node:stream/consumers"

const invalidValue = (message: string) =>
  ValidationError.invalidValue({ _tag: "Paragraph", value: { _tag: "Text", value: message } })

/** A text option that must not be blank; its value trimmed. */
export const nonEmpty = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((value) =>
      value.trim() === "" ? Effect.fail(invalidValue(`--${name} must not be empty`)) : Effect.succeed(value.trim())
    )
  )

/** An option naming a Graph object by its numeric id. */
export const graphId = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withDescription(description),
    Options.mapEffect((value) =>
      /^\d{1,32}$/.test(value)
        ? Effect.succeed(value)
        : Effect.fail(invalidValue(`--${name} must be a numeric Graph id`))
    )
  )

export const orgOption = Options.text("org").pipe(
  Options.withDescription("The organization's id (org_…; see `hub org list`)")
)

/** Standard input, trimmed (a secret given there shows in neither `ps` nor the shell's history). */
export const readStandardInput = Effect.promise(() => text(process.stdin)).pipe(Effect.map((input) => input.trim()))

/** Refusals through the typed client: the failure, checked to be the error of `tag` and typed as it. */
import { expect } from "@effect/vitest"
import { Effect } from "effect"

/** The typed error `effect` fails with, which must be of `tag` (the whole failure shown when it is not). */
export const refusedWith = <E extends { readonly _tag: string }, R, Tag extends E["_tag"]>(
  effect: Effect.Effect<unknown, E, R>,
  tag: Tag
) =>
  Effect.map(Effect.flip(effect), (error) => {
    expect(error).toMatchObject({ _tag: tag })
    return error as Extract<E, { readonly _tag: Tag }>
  })

/**
 * The upstream target of the current request: the instance the caller's token acts for (or, for an
 * organization token, the one it names) with that instance's ids and access token.
 */
import { Effect, Schema } from "effect"
import { GraphId } from "../Domain/Ids.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { IdString } from "../Domain/Schemas.js"
import { InstanceAccess, type InstanceSelector } from "./InstanceAccess.js"

export const requestTarget = (selector: InstanceSelector = {}) =>
  Effect.gen(function*() {
    const access = yield* InstanceAccess
    const instance = yield* access.resolve(yield* CurrentPrincipal, selector)
    return yield* access.target(instance)
  })

/** Query fields by which an organization token names the instance (an instance token may omit them). */
export const instanceSelectorFields = {
  instance_id: Schema.optional(IdString),
  phone_number_id: Schema.optional(GraphId)
}

/** The `instance_id` / `phone_number_id` query of endpoints open to organization tokens, as a selector. */
export const selectorOf = (
  query: { readonly instance_id?: string | undefined; readonly phone_number_id?: string | undefined }
): InstanceSelector => ({
  instanceId: query.instance_id,
  phoneNumberId: query.phone_number_id
})

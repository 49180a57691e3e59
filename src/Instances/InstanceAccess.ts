/**
 * Which instance a request acts for, and the upstream target (ids plus decrypted access token) for it.
 * An instance token acts for its own instance; an organization token names one of its instances
 * by `instance_id` or `phone_number_id`. Other tenants' instances are 404, never revealed.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { BadRequest, Forbidden, NotFound, UpstreamFailure } from "../Domain/Errors.js"
import type { InstanceRef, Principal } from "../Domain/Principal.js"
import type { UpstreamTarget } from "../Upstream/Upstream.js"
import { InstancesRepo, toInstanceRef } from "./Repo.js"

export interface InstanceSelector {
  readonly instanceId?: string | undefined
  readonly phoneNumberId?: string | undefined
}

/** Decrypted access tokens are kept briefly so the hot path neither queries nor decrypts each time. */
const TARGET_TTL_MS = 60_000

export class InstanceAccess extends Context.Tag("InstanceAccess")<InstanceAccess, {
  readonly resolve: (principal: Principal, selector: InstanceSelector) => Effect.Effect<InstanceRef, BadRequest | Forbidden | NotFound>
  readonly target: (instance: InstanceRef) => Effect.Effect<UpstreamTarget, UpstreamFailure>
}>() {}

const describe = (selector: InstanceSelector) =>
  selector.instanceId !== undefined ? `instance_id ${selector.instanceId}` : `phone_number_id ${selector.phoneNumberId}`

export const InstanceAccessLive = Layer.effect(
  InstanceAccess,
  Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const targets = new Map<string, { readonly target: UpstreamTarget; readonly at: number }>()

    const find = (selector: InstanceSelector) =>
      selector.instanceId !== undefined
        ? repo.findById(selector.instanceId).pipe(
          Effect.map(Option.filter((row) => selector.phoneNumberId === undefined || row.phone_number_id === selector.phoneNumberId))
        )
        : repo.findByPhoneNumberId(selector.phoneNumberId ?? "")

    return InstanceAccess.of({
      resolve: (principal, selector) =>
        Effect.gen(function*() {
          const named = selector.instanceId !== undefined || selector.phoneNumberId !== undefined
          if (principal.instance !== undefined) {
            const own = principal.instance
            if (
              (selector.instanceId !== undefined && selector.instanceId !== own.id) ||
              (selector.phoneNumberId !== undefined && selector.phoneNumberId !== own.phoneNumberId)
            ) {
              return yield* new Forbidden({
                message: `This instance token is bound to instance ${own.id} (phone_number_id ${own.phoneNumberId}); it cannot act for ${describe(selector)}`,
                error: "forbidden_instance"
              })
            }
            return own
          }
          if (!named) {
            return yield* new BadRequest({
              message: "An organization token must name the instance: give phone_number_id or instance_id",
              error: "instance_required"
            })
          }
          const row = Option.filter(yield* find(selector), (r) => r.organization_id === principal.organizationId)
          if (Option.isNone(row)) {
            return yield* new NotFound({ message: `${describe(selector)} was not found`, error: "not_found" })
          }
          return toInstanceRef(row.value)
        }),
      target: (instance) =>
        Effect.gen(function*() {
          const now = Date.now()
          const cached = targets.get(instance.id)
          if (cached !== undefined && now - cached.at < TARGET_TTL_MS) return cached.target
          const token = yield* repo.accessToken(instance.id)
          if (Option.isNone(token)) {
            return yield* new UpstreamFailure({
              status: 502,
              message: `Instance ${instance.id} has no upstream access token configured`,
              error: "instance_not_configured"
            })
          }
          const target: UpstreamTarget = {
            phoneNumberId: instance.phoneNumberId,
            wabaId: instance.wabaId,
            accessToken: Redacted.make(token.value)
          }
          targets.set(instance.id, { target, at: now })
          return target
        })
    })
  })
)

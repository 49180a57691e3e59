/**
 * Which instance a request acts for, and the upstream target (ids plus decrypted access token) for it.
 * An instance token acts for its own instance; an organization token names one of its instances
 * by `instance_id` or `phone_number_id`. Other tenants' instances are 404, never revealed.
 */
import { Effect, Either, Option, Redacted } from "effect"
import { LRUCache } from "lru-cache"
import { BadRequest, Forbidden, NotFound, UpstreamFailure } from "../Domain/Errors.js"
import type { InstanceRef, Principal } from "../Domain/Principal.js"
import type { UpstreamTarget } from "../Upstream/Upstream.js"
import { InstancesRepo, InstancesRepoLive, toInstanceRef } from "./Repo.js"

export interface InstanceSelector {
  readonly instanceId?: string | undefined
  readonly phoneNumberId?: string | undefined
}

/** Decrypted access tokens are kept briefly so the hot path neither queries nor decrypts each time. */
const TARGET_TTL_MS = 60_000

/** Most instances kept found (an organization token's lookups); past it the cache starts over. */
const KNOWN_INSTANCES = 10_000

interface InstanceAccessShape {
  readonly resolve: (
    principal: Principal,
    selector: InstanceSelector
  ) => Effect.Effect<InstanceRef, BadRequest | Forbidden | NotFound>
  /**
   * What resolve answers when it needs no lookup (an instance token, a selector missing, or an
   * instance found before); undefined otherwise.
   */
  readonly resolveNow: (
    principal: Principal,
    selector: InstanceSelector
  ) => Either.Either<InstanceRef, BadRequest | Forbidden | NotFound> | undefined
  readonly target: (instance: InstanceRef) => Effect.Effect<UpstreamTarget, UpstreamFailure>
  /** The target if it is cached (see TARGET_TTL_MS), undefined otherwise: then `target` loads it. */
  readonly targetNow: (instance: InstanceRef) => UpstreamTarget | undefined
}

const describe = (selector: InstanceSelector) =>
  selector.instanceId !== undefined ? `instance_id ${selector.instanceId}` : `phone_number_id ${selector.phoneNumberId}`

/** The key of a found instance in InstanceAccess's cache: by id or by phone number id. */
const keyOf = (selector: InstanceSelector) =>
  selector.instanceId !== undefined ? `id ${selector.instanceId}` : `phone ${selector.phoneNumberId}`

const notFound = (selector: InstanceSelector) =>
  new NotFound({ message: `${describe(selector)} was not found`, error: "not_found" })

/** The selected instance, if it is one the organization has; another tenant's is not found, as in the database. */
const ownedBy = (principal: Principal, selector: InstanceSelector, instance: InstanceRef) =>
  instance.organizationId === principal.organizationId &&
  (selector.phoneNumberId === undefined || instance.phoneNumberId === selector.phoneNumberId)

/** An instance token's own instance, or a 403 when the selector names another. */
const ownInstance = (own: InstanceRef, selector: InstanceSelector): Either.Either<InstanceRef, Forbidden> =>
  (selector.instanceId !== undefined && selector.instanceId !== own.id) ||
    (selector.phoneNumberId !== undefined && selector.phoneNumberId !== own.phoneNumberId)
    ? Either.left(
      new Forbidden({
        message:
          `This instance token is bound to instance ${own.id} (phone_number_id ${own.phoneNumberId}); it cannot act for ${
            describe(selector)
          }`,
        error: "forbidden_instance"
      })
    )
    : Either.right(own)

const instanceRequired = () =>
  new BadRequest({
    message: "An organization token must name the instance: give phone_number_id or instance_id",
    error: "instance_required"
  })

const notConfigured = (instance: InstanceRef) =>
  new UpstreamFailure({
    status: 502,
    message: `Instance ${instance.id} has no upstream access token configured`,
    error: "instance_not_configured"
  })

export class InstanceAccess extends Effect.Service<InstanceAccess>()("InstanceAccess", {
  effect: Effect.gen(function*() {
    const repo = yield* InstancesRepo
    const targets = new LRUCache<string, { readonly target: UpstreamTarget; readonly at: number }>({
      max: KNOWN_INSTANCES
    })
    // Instances found for organization tokens, by id and by phone number id. An instance is never
    // changed or removed once created (no endpoint or command does), so what was found stays true;
    // what was not found is not kept, since the CLI may create it at any time.
    const found = new LRUCache<string, InstanceRef>({ max: KNOWN_INSTANCES })
    const remember = (instance: InstanceRef) => {
      found.set(`id ${instance.id}`, instance)
      found.set(`phone ${instance.phoneNumberId}`, instance)
    }

    // A phone number that does not match the instance named is refused by ownedBy, like another tenant's.
    const find = (selector: InstanceSelector) =>
      selector.instanceId !== undefined
        ? repo.findById(selector.instanceId)
        : repo.findByPhoneNumberId(selector.phoneNumberId ?? "")

    const resolveNow = (
      principal: Principal,
      selector: InstanceSelector
    ): Either.Either<InstanceRef, BadRequest | Forbidden | NotFound> | undefined => {
      if (principal.instance !== undefined) return ownInstance(principal.instance, selector)
      if (selector.instanceId === undefined && selector.phoneNumberId === undefined) {
        return Either.left(instanceRequired())
      }
      const known = found.get(keyOf(selector))
      if (known === undefined) return undefined
      return ownedBy(principal, selector, known) ? Either.right(known) : Either.left(notFound(selector))
    }

    const targetNow = (instance: InstanceRef) => {
      const cached = targets.get(instance.id)
      return cached !== undefined && Date.now() - cached.at < TARGET_TTL_MS ? cached.target : undefined
    }

    const service: InstanceAccessShape = {
      resolveNow,
      targetNow,
      resolve: (principal, selector) => {
        // Plain effects, no generator: this runs on every send.
        const known = resolveNow(principal, selector)
        if (known !== undefined) return known
        return Effect.flatMap(find(selector), (row) => {
          if (Option.isNone(row)) return Effect.fail(notFound(selector))
          const instance = toInstanceRef(row.value)
          remember(instance)
          return ownedBy(principal, selector, instance) ? Effect.succeed(instance) : Effect.fail(notFound(selector))
        })
      },
      target: (instance) => {
        const cached = targetNow(instance)
        if (cached !== undefined) return Effect.succeed(cached)
        return Effect.flatMap(repo.accessToken(instance.id), (token) => {
          if (Option.isNone(token)) return Effect.fail(notConfigured(instance))
          const target: UpstreamTarget = {
            phoneNumberId: instance.phoneNumberId,
            wabaId: instance.wabaId,
            accessToken: Redacted.make(token.value)
          }
          targets.set(instance.id, { target, at: Date.now() })
          return Effect.succeed(target)
        })
      }
    }
    return service
  }),
  dependencies: [InstancesRepoLive]
}) {}

import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { HubApi } from "../Api.js"
import { HubConfig } from "../Config.js"
import { NotFound } from "../Domain/Errors.js"
import { CurrentPrincipal } from "../Domain/Principal.js"
import { InstanceAccess } from "../Instances/InstanceAccess.js"
import { Ingress } from "../UpstreamEvents/Ingress.js"
import type { SandboxInbound } from "./Api.js"
import { wamid } from "./Graph/Ids.js"
import { inboundMessagePayload } from "./Graph/Webhooks.js"

const contentOf = (inbound: typeof SandboxInbound.Type) => {
  switch (inbound.type) {
    case "contacts":
      return inbound.contacts
    default:
      return inbound[inbound.type]
  }
}

export const SandboxHttpLive = HttpApiBuilder.group(HubApi, "sandbox", (handlers) =>
  Effect.gen(function*() {
    const config = yield* HubConfig
    const ingress = yield* Ingress
    const access = yield* InstanceAccess
    const sandboxOnly = (route: string) =>
      config.upstream === "sandbox"
        ? Effect.void
        : Effect.fail(
          new NotFound({
            message: `POST ${route} exists only in sandbox mode (HUB_UPSTREAM=sandbox)`,
            error: "route_not_found"
          })
        )
    return handlers.handle("inbound", ({ payload }) =>
      Effect.gen(function*() {
        yield* sandboxOnly("/sandbox/inbound")
        const instance = yield* access.resolve(yield* CurrentPrincipal, {
          instanceId: payload.instance_id,
          phoneNumberId: payload.phone_number_id
        })
        const from = payload.from?.replace(/^\+/, "")
        const id = wamid(from ?? payload.user_id ?? "")
        const content = contentOf(payload)
        const result = yield* ingress.ingest(inboundMessagePayload({
          phoneNumberId: instance.phoneNumberId,
          wabaId: instance.wabaId,
          ...(from === undefined ? {} : { from }),
          ...(payload.user_id === undefined ? {} : { userId: payload.user_id }),
          ...(payload.username === undefined ? {} : { username: payload.username }),
          type: payload.type,
          messageId: id,
          at: Date.now(),
          ...(content === undefined ? {} : { content }),
          ...(payload.name === undefined ? {} : { profileName: payload.name }),
          ...(payload.context === undefined ? {} : { contextMessageId: payload.context.id })
        }))
        return { id, deliveries: result.deliveries }
      })).handle("changes", ({ payload }) =>
        Effect.gen(function*() {
          yield* sandboxOnly("/sandbox/changes")
          const instance = yield* access.resolve(yield* CurrentPrincipal, {
            instanceId: payload.instance_id,
            phoneNumberId: payload.phone_number_id
          })
          const result = yield* ingress.ingest({
            object: "whatsapp_business_account",
            entry: [{
              id: instance.wabaId,
              changes: payload.changes.map((change) => ({
                field: change.field,
                // The metadata always names this instance's number: a change routes by it, never elsewhere.
                value: {
                  messaging_product: "whatsapp",
                  ...change.value,
                  metadata: { display_phone_number: instance.phoneNumberId, phone_number_id: instance.phoneNumberId }
                }
              }))
            }]
          })
          return { accepted: result.accepted, deliveries: result.deliveries }
        }))
  }))

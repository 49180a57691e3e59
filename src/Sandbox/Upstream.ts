/**
 * SandboxUpstream: an in-process simulator of the Graph calls (HUB_UPSTREAM=sandbox, the default),
 * so a new user has a working hub with no Meta account. State lives in memory, per phone number / WABA.
 *
 * Behaviour
 * - Ids in the real formats: `wamid.` + base64 messages, numeric media/template/flow ids,
 *   14-character [A-Z0-9] QR codes, `wacid.` calls.
 * - Templates are PENDING, then APPROVED after HUB_SANDBOX_APPROVAL_DELAY. A template send needs an
 *   APPROVED template of that name and language code, else 132001 (subcode 2494073, HTTP 404).
 * - After an accepted send, status events sent → delivered → read (HUB_SANDBOX_STATUS_DELAY before each)
 *   are emitted as full webhook payloads to SandboxEvents, in a fiber of the layer's scope.
 *
 * Deterministic failures (reserved prefixes; +999 is no assigned country code). A recipient `to`,
 * an object id (media, template, flow, QR code, group, call_id after `wacid.`), an upload's filename,
 * or the instance's phone_number_id / WABA id starting with:
 *   999100    → 400, code 100 (invalid parameter)        999190    → 401, code 190 (token expired)
 *   999200    → 403, code 200 (permission)               99980007  → 429, code 80007, Retry-After 60
 *   999130429 → 429, code 130429, Retry-After 2          999131056 → 429, code 131056, Retry-After 6
 *   999131057 → 503, code 131057 (throughput upgrade)    999131062 → 400, code 131062 (BSUID not allowed)
 *   999131030 → 400, code 131030 (recipient not allowed) 999132001 → 404, code 132001 / 2494073
 *   999138006 → 400, code 138006 (no call permission)    999500    → 500, code 131000 (transient)
 *   999503    → 503, code 2 (service unavailable)
 * The 24 h window only applies to reserved recipients, so the default sandbox stays usable:
 *   999131047 → free-form sends refused at once: 400, code 131047 (template sends pass)
 *   999231047 → free-form sends accepted, then a `failed` status event with error 131047
 * Block Users keeps each number's blocked users in memory; a user to block or unblock starting with
 *   999139100 (a number, or the id part of a business-scoped user id) is refused on its own: the
 *   call fails with 139100, its answer listing each user taken and refused.
 * Example: to "999131030000" answers 131030; media id "9995001" answers 500.
 * Throughput levels (GET /{phone-number-id}?fields=throughput): a phone_number_id ending in 1000 is
 * HIGH (1,000/s), one ending in 0020 is COEXISTENCE (20/s, also on the Business app), others STANDARD.
 */
import { Duration, Effect, FiberSet, Layer, Runtime } from "effect"
import { HubConfig } from "../Config.js"
import { Upstream, type UpstreamTarget } from "../Upstream/Upstream.js"
import { SandboxEvents } from "./Events.js"
import * as Account from "./Graph/Account.js"
import { makeBlockStore } from "./Graph/BlockUsers.js"
import { invalidParameter, windowClosedStatusError } from "./Graph/Failures.js"
import { makeFlowStore } from "./Graph/Flows.js"
import { makeMediaStore } from "./Graph/Media.js"
import { type AcceptedSend, acceptSend } from "./Graph/Messages.js"
import { makeSettingsStore } from "./Graph/Settings.js"
import { makeTemplateStore } from "./Graph/Templates.js"
import { conversationId, type StatusName, statusPayload } from "./Graph/Webhooks.js"

const makeSandboxUpstream = Effect.gen(function*() {
  const config = yield* HubConfig
  const events = yield* SandboxEvents
  const fibers = yield* FiberSet.make()
  // The Upstream's send is a plain promise (see Upstream.ts); here it runs the sandbox's effect.
  const runPromise = Runtime.runPromise(yield* Effect.runtime<never>())
  const templates = makeTemplateStore(config.sandboxApprovalDelay)
  const media = makeMediaStore()
  const settings = makeSettingsStore()
  const flows = makeFlowStore()
  const blocks = makeBlockStore()

  /** The events the real upstream would post after this send, each after the status delay. */
  const emitStatuses = (target: UpstreamTarget, send: AcceptedSend) => {
    const steps: ReadonlyArray<StatusName> = send.outcome === "window_closed"
      ? ["failed"]
      : ["sent", "delivered", "read"]
    const conversation = conversationId()
    const category = send.templateCategory ?? "service"
    return Effect.forEach(steps, (status) =>
      Effect.gen(function*() {
        yield* Effect.sleep(config.sandboxStatusDelay)
        const at = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
        yield* events.emit(statusPayload(target, {
          messageId: send.messageId,
          recipient: send.recipient,
          status,
          at,
          category,
          conversationId: conversation,
          ...(status === "failed" ? { errors: [windowClosedStatusError] } : {})
        }))
      }), { discard: true }).pipe(
        Effect.catchAllCause((cause) => Effect.logWarning("Sandbox status events stopped", cause))
      )
  }

  const approvedTemplate = (target: UpstreamTarget) => (name: string, language: string) =>
    templates.approved(target.wabaId, name, language)

  return Upstream.of({
    sendMessage: (target, body, endpoint = "messages") =>
      runPromise(Effect.either(Effect.gen(function*() {
        const send = yield* acceptSend(target, body, approvedTemplate(target))
        // The Marketing Messages API takes MARKETING templates only, as Meta's does.
        if (endpoint === "marketing_messages" && send.templateCategory !== "marketing") {
          return yield* Effect.fail(
            invalidParameter("The Marketing Messages API sends MARKETING templates only; send others to /messages")
          )
        }
        // The emitter belongs to the layer's scope and stops when it closes.
        yield* FiberSet.run(fibers, emitStatuses(target, send))
        return send.response
      }))),
    uploadMedia: media.upload,
    getMedia: media.info,
    downloadMedia: media.download,
    createTemplate: templates.create,
    listTemplates: templates.list,
    getTemplate: (target, templateId) => templates.get(target, templateId),
    getSettings: settings.get,
    updateSettings: settings.update,
    getPhoneNumber: Account.phoneNumber,
    listPhoneNumbers: Account.phoneNumbers,
    callAction: Account.callAction,
    listActivities: Account.listActivities,
    getComplianceInfo: Account.complianceInfo,
    listQrCodes: Account.listQrCodes,
    getQrCode: Account.getQrCode,
    listFlows: flows.list,
    listFlowAssets: flows.assets,
    uploadFlowAsset: flows.upload,
    deprecateFlow: flows.deprecate,
    getGroup: Account.getGroup,
    listGroups: Account.listGroups,
    getBusinessProfile: Account.businessProfile,
    blockUsers: blocks.block,
    unblockUsers: blocks.unblock,
    listBlockedUsers: blocks.list
  })
})

/** The sandbox upstream; its status-event fibers stop with the layer's scope. */
export const SandboxUpstream = Layer.scoped(Upstream, makeSandboxUpstream)

/** Settings tests commonly want: no approval or status delays. */
export const immediateSandbox = { sandboxApprovalDelay: Duration.zero, sandboxStatusDelay: Duration.zero }

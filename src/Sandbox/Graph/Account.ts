/**
 * Sandbox business-account data: the phone number list, QR codes, groups, activities, compliance
 * info, business profile and call actions, in the upstream's envelopes with its paging and filters.
 */
import { Clock, Effect } from "effect"
import type { JsonObject } from "../../Domain/Json.js"
import type { GraphQuery, UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { checkReserved, invalidParameter, unknownObject } from "./Failures.js"
import { displayDigits, formattedDisplayNumber, qrCode, stableNumericId, wacid } from "./Ids.js"
import { page, selectFields } from "./Paging.js"

const GRAPH = "https://graph.facebook.com/v23.0"
const DAY_MS = 24 * 3600 * 1000

/** The sandbox's throughput level of a number (see Sandbox/Upstream.ts). */
const throughputLevel = (phoneNumberId: string) =>
  phoneNumberId.endsWith("1000") ? "HIGH" : phoneNumberId.endsWith("0020") ? "COEXISTENCE" : "STANDARD"

/** GET /{phone-number-id}: the number's fields (all of them, whatever `fields` asks). */
export const phoneNumber = (target: UpstreamTarget, _query: GraphQuery) =>
  Effect.as(checkReserved(target.wabaId), {
    verified_name: "Sandbox Business",
    display_phone_number: formattedDisplayNumber(target.phoneNumberId),
    quality_rating: "GREEN",
    platform_type: "CLOUD_API",
    throughput: { level: throughputLevel(target.phoneNumberId) },
    id: target.phoneNumberId
  })

export const phoneNumbers = (target: UpstreamTarget, query: GraphQuery) =>
  Effect.zipRight(
    checkReserved(target.wabaId),
    page(
      [{
        verified_name: "Sandbox Business",
        code_verification_status: "VERIFIED",
        display_phone_number: formattedDisplayNumber(target.phoneNumberId),
        quality_rating: "GREEN",
        platform_type: "CLOUD_API",
        throughput: { level: throughputLevel(target.phoneNumberId) },
        status: "CONNECTED",
        messaging_limit_tier: "TIER_1K",
        id: target.phoneNumberId
      }],
      query,
      { link: `${GRAPH}/${target.wabaId}/phone_numbers` }
    )
  )

const QR_MESSAGES = ["Show me today's deals!", "I'd like to book an appointment", "Where is my order?"]

const qrCodesOf = (phoneNumberId: string): ReadonlyArray<JsonObject> =>
  QR_MESSAGES.map((prefilled, i) => {
    const code = qrCode(`qr:${phoneNumberId}:${i}`)
    return {
      code,
      prefilled_message: prefilled,
      deep_link_url: `https://wa.me/message/${code}`,
      qr_image_url: `http://sandbox.invalid/qr/${code}.svg`
    }
  })

export const listQrCodes = (target: UpstreamTarget, query: GraphQuery) =>
  Effect.zipRight(
    checkReserved(target.phoneNumberId),
    page(
      qrCodesOf(target.phoneNumberId).filter((qr) => query.code === undefined || qr.code === query.code),
      query,
      { link: `${GRAPH}/${target.phoneNumberId}/message_qrdls` }
    )
  )

export const getQrCode = (
  target: UpstreamTarget,
  code: string,
  query: GraphQuery
): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.gen(function*() {
    yield* checkReserved(target.phoneNumberId, code)
    const qr = qrCodesOf(target.phoneNumberId).find((q) => q.code === code)
    if (qr === undefined) return yield* Effect.fail(unknownObject(code))
    return { data: [selectFields(qr, query.fields)] }
  })

/** Cloud API group ids are base64 text of `capi_group:<number>:<group number>` (plus a suffix). */
const CLOUD_GROUP_ID = /^Y2FwaV9ncm91cDo[A-Za-z0-9_=-]{1,240}$/

/**
 * The groups a sandbox number has: three, in the Cloud API's form (base64url of
 * `capi_group:<display number>:<group number>`), derived from the number so they are stable.
 */
export const sandboxGroupsOf = (phoneNumberId: string): ReadonlyArray<string> =>
  [1, 2, 3].map((n) =>
    Buffer.from(`capi_group:${displayDigits(phoneNumberId)}:${stableNumericId(`group:${phoneNumberId}:${n}`, 18)}`)
      .toString("base64url")
  )

/** GET /{phone-number-id}/groups: the number's groups (one page holds them all). */
export const listGroups = (target: UpstreamTarget, _query: GraphQuery): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.as(checkReserved(target.phoneNumberId, target.phoneNumberId), {
    data: sandboxGroupsOf(target.phoneNumberId).map((id) => ({ id })),
    paging: { cursors: {} }
  })

/**
 * Any `<digits>@g.us` is a group of the sandbox, and so is any Cloud API group id; its details are
 * derived from the id, so they are stable (which number has it is for listGroups to say).
 */
export const getGroup = (target: UpstreamTarget, groupId: string): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.gen(function*() {
    yield* checkReserved(target.phoneNumberId, groupId)
    const numbered = /^(\d{1,30})@g\.us$/.exec(groupId)?.[1]
    if (numbered === undefined && !CLOUD_GROUP_ID.test(groupId)) return yield* Effect.fail(unknownObject(groupId))
    const digits = numbered ?? stableNumericId(`group:${groupId}`)
    const size = 2 + (Number(digits.slice(-1)) % 4)
    return {
      id: groupId,
      messaging_product: "whatsapp",
      subject: `Sandbox group ${digits.slice(-4)}`,
      description: "A group simulated by the sandbox",
      creation_timestamp: 1750000000 + (Number(digits.slice(-6)) % 1000000),
      suspended: false,
      total_participant_count: size,
      participants: Array.from({ length: size }, (_, i) => ({ wa_id: `1650555${String(1000 + i)}` })),
      join_approval_mode: "approval_required"
    }
  })

const ACTIVITY_KINDS = [
  { type: "ACCOUNT_CREATED", description: "Business account created", actor: "SYSTEM" },
  { type: "PHONE_NUMBER_ADDED", description: "Phone number added", actor: "USER" },
  { type: "PHONE_NUMBER_VERIFIED", description: "Phone number verified", actor: "SYSTEM" },
  { type: "TEMPLATE_CREATED", description: "Template created", actor: "API" },
  { type: "WEBHOOK_CONFIGURED", description: "Webhook configured", actor: "USER" },
  { type: "USER_ADDED", description: "User added to the business account", actor: "ADMIN" }
] as const

/** `since` / `until` as Unix seconds or ISO 8601; undefined when absent, a failure when unreadable. */
const parseTime = (name: string, value: string | undefined): Effect.Effect<number | undefined, UpstreamError> => {
  if (value === undefined || value === "") return Effect.succeed(undefined)
  if (/^\d+$/.test(value)) return Effect.succeed(Number(value) * 1000)
  const at = Date.parse(value)
  return Number.isNaN(at)
    ? Effect.fail(invalidParameter(`Param ${name} must be a Unix timestamp or an ISO 8601 date`))
    : Effect.succeed(at)
}

/** Twenty activities, one every three days back from now, newest first. */
export const listActivities = (target: UpstreamTarget, query: GraphQuery): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.gen(function*() {
    yield* checkReserved(target.wabaId)
    const since = yield* parseTime("since", query.since)
    const until = yield* parseTime("until", query.until)
    if (since !== undefined && until !== undefined && since > until) {
      return yield* Effect.fail(invalidParameter("Param since must be before until"))
    }
    const types = query.activity_type?.split(",").map((t) => t.trim().toUpperCase()).filter((t) => t !== "")
    const now = yield* Clock.currentTimeMillis
    const anchor = Math.floor(now / DAY_MS) * DAY_MS
    const items = Array.from({ length: 20 }, (_, i) => {
      const kind = ACTIVITY_KINDS[i % ACTIVITY_KINDS.length] ?? ACTIVITY_KINDS[0]
      const at = anchor - i * 3 * DAY_MS
      return {
        at,
        item: {
          id: stableNumericId(`activity:${target.wabaId}:${i}`),
          activity_type: kind.type,
          timestamp: new Date(at).toISOString().replace(/\.\d{3}Z$/, "Z"),
          actor_type: kind.actor,
          actor_id: stableNumericId(`actor:${target.wabaId}:${kind.actor}`),
          actor_name: kind.actor === "SYSTEM" ? "WhatsApp" : "Sandbox Admin",
          description: kind.description,
          details: kind.type === "TEMPLATE_CREATED"
            ? { template_name: "welcome_message", template_language: "en_US", template_category: "MARKETING" }
            : {}
        }
      }
    })
      .filter(({ at }) => (since === undefined || at >= since) && (until === undefined || at <= until))
      .filter(({ item }) => types === undefined || types.length === 0 || types.includes(item.activity_type))
      .map(({ item }) => item)
    return yield* page(items, query, { link: `${GRAPH}/${target.wabaId}/activities` })
  })

export const complianceInfo = (target: UpstreamTarget): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.as(checkReserved(target.phoneNumberId), {
    data: [{
      whatsapp_business_account_id: target.wabaId,
      messaging_product: "whatsapp",
      entity_name: "Sandbox Business Private Limited",
      entity_type: "Partnership",
      entity_type_custom: null,
      is_registered: true,
      grievance_officer_details: {
        name: "Sandbox Officer",
        email: "grievance@sandbox.invalid",
        mobile_number: "+913854559033",
        landline_number: "+913857614343"
      },
      customer_care_details: {
        email: "support@sandbox.invalid",
        mobile_number: "+913854559033",
        landline_number: "+913857614343"
      }
    }]
  })

export const businessProfile = (target: UpstreamTarget, query: GraphQuery): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.as(checkReserved(target.phoneNumberId), {
    data: [selectFields({
      about: "Simulated by the Messaging Hub sandbox",
      address: "1 Sandbox Way, Testville",
      description: "A business that exists only in the sandbox",
      email: "hello@sandbox.invalid",
      profile_picture_url: "http://sandbox.invalid/profile.jpg",
      websites: ["https://example.com"],
      vertical: "OTHER",
      messaging_product: "whatsapp"
    }, query.fields)]
  })

const CALL_ACTIONS = ["connect", "pre_accept", "accept", "reject", "terminate"]

export const callAction = (target: UpstreamTarget, body: JsonObject): Effect.Effect<JsonObject, UpstreamError> =>
  Effect.gen(function*() {
    yield* checkReserved(target.phoneNumberId)
    const action = body.action
    if (typeof action !== "string" || !CALL_ACTIONS.includes(action)) {
      return yield* Effect.fail(invalidParameter(`Param action must be one of {${CALL_ACTIONS.join(", ")}}`))
    }
    const to = typeof body.to === "string" ? body.to : undefined
    const callId = typeof body.call_id === "string" ? body.call_id : undefined
    if (action === "connect" ? to === undefined : to === undefined && callId === undefined) {
      return yield* Effect.fail(
        invalidParameter(`The parameter ${action === "connect" ? "to" : "call_id"} is required.`)
      )
    }
    yield* checkReserved(to, callId)
    return action === "connect"
      ? { messaging_product: "whatsapp", calls: [{ id: wacid() }] }
      : { messaging_product: "whatsapp", success: true }
  })

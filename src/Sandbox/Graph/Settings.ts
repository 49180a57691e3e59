/**
 * Sandbox phone-number settings: a realistic default (research §3.4) overlaid with what updates
 * stored. An update carries exactly one feature section; SIP passwords are shown only on request.
 */
import { Effect } from "effect"
import type { Json, JsonObject } from "../../Domain/Json.js"
import { isJsonObject } from "../../Domain/Json.js"
import type { UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { checkReserved, invalidParameter } from "./Failures.js"
import { hex, sha256Hex } from "./Ids.js"

const SECTIONS = ["calling", "payload_encryption", "storage_configuration", "user_identity_change"]
const SIP_SECRET_KEYS = ["sip_user_password", "password"]

const defaults = (): Record<string, JsonObject> => ({
  calling: {
    status: "ENABLED",
    call_icon_visibility: "DEFAULT",
    callback_permission_status: "ENABLED",
    srtp_key_exchange_protocol: "DTLS",
    call_hours: {
      status: "ENABLED",
      timezone_id: "Europe/Berlin",
      weekly_operating_hours: [{ day_of_week: "MONDAY", open_time: "0900", close_time: "1700" }],
      holiday_schedule: []
    },
    sip: {
      status: "ENABLED",
      servers: [{
        app_id: 1234567890,
        hostname: "sip.sandbox.invalid",
        port: 5061,
        request_uri_user_params: { tgrp: "wa" },
        sip_user_password: hex(12)
      }]
    }
  },
  payload_encryption: { status: "disabled" },
  storage_configuration: { status: "DEFAULT" }
})

/** The SIP servers without their passwords. */
const withoutSipSecrets = (calling: JsonObject): JsonObject => {
  const sip = calling.sip
  if (!isJsonObject(sip) || !Array.isArray(sip.servers)) return calling
  const servers = sip.servers.map((server: Json) =>
    isJsonObject(server)
      ? Object.fromEntries(Object.entries(server).filter(([key]) => !SIP_SECRET_KEYS.includes(key)))
      : server
  )
  return { ...calling, sip: { ...sip, servers } }
}

/** What the upstream keeps of an update: enabling payload encryption yields the key fingerprints. */
const stored = (section: string, value: JsonObject): JsonObject => {
  if (
    section === "payload_encryption" && String(value.status).toLowerCase() === "enabled" &&
    typeof value.client_encryption_key === "string"
  ) {
    return {
      status: "enabled",
      client_encryption_key_fingerprint: sha256Hex(new TextEncoder().encode(value.client_encryption_key)),
      cloud_encryption_key: Buffer.from(hex(32), "hex").toString("base64")
    }
  }
  return value
}

export const makeSettingsStore = () => {
  const byNumber = new Map<string, Record<string, JsonObject>>()
  const settingsOf = (phoneNumberId: string) => {
    let settings = byNumber.get(phoneNumberId)
    if (settings === undefined) {
      settings = defaults()
      byNumber.set(phoneNumberId, settings)
    }
    return settings
  }

  const get = (target: UpstreamTarget, includeSipCredentials: boolean): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.phoneNumberId)
      const settings = settingsOf(target.phoneNumberId)
      const result: Record<string, Json> = {}
      for (const [section, value] of Object.entries(settings)) {
        result[section] = section === "calling" && !includeSipCredentials ? withoutSipSecrets(value) : value
      }
      return result
    })

  const update = (target: UpstreamTarget, body: JsonObject): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.phoneNumberId)
      const given = SECTIONS.filter((section) => body[section] !== undefined)
      const [section] = given
      if (given.length !== 1 || section === undefined) {
        return yield* Effect.fail(
          invalidParameter(
            "One feature setting must be specified",
            `Give exactly one of ${SECTIONS.join(", ")}; got ${given.length}`
          )
        )
      }
      const value = body[section]
      if (!isJsonObject(value)) return yield* Effect.fail(invalidParameter(`Param ${section} must be an object`))
      const settings = settingsOf(target.phoneNumberId)
      const previous = settings[section] ?? {}
      const next = stored(section, value)
      settings[section] = section === "payload_encryption" ? next : { ...previous, ...next }
      return { success: true }
    })

  return { get, update }
}

/**
 * Sandbox flows per WABA: two seeded flows (one PUBLISHED, one DRAFT) with a flow.json asset each.
 * Uploaded assets replace the one of the same name; a FLOW_JSON is checked for valid JSON and a
 * top-level "version". Deprecating works once, on a PUBLISHED flow.
 */
import { Effect } from "effect"
import type { Json, JsonObject } from "../../Domain/Json.js"
import type { GraphQuery, UploadFile, UpstreamTarget } from "../../Upstream/Upstream.js"
import type { UpstreamError } from "../../Upstream/UpstreamError.js"
import { checkReserved, invalidParameter, unknownObject } from "./Failures.js"
import { stableNumericId } from "./Ids.js"
import { MEDIA_URL_BASE } from "./Media.js"
import { page } from "./Paging.js"

interface Asset {
  readonly name: string
  readonly assetType: string
  readonly bytes: Uint8Array
}

interface Flow {
  readonly id: string
  readonly wabaId: string
  readonly name: string
  status: "DRAFT" | "PUBLISHED" | "DEPRECATED"
  readonly categories: ReadonlyArray<string>
  validationErrors: ReadonlyArray<JsonObject>
  readonly assets: Map<string, Asset>
}

const SEED_FLOW_JSON = new TextEncoder().encode(JSON.stringify({
  version: "7.2",
  screens: [{ id: "WELCOME", title: "Welcome", terminal: true, layout: { type: "SingleColumnLayout", children: [] } }]
}))

/** Research §3.7: validation errors come back in the upload answer and on the flow. */
const validateFlowJson = (bytes: Uint8Array): ReadonlyArray<JsonObject> => {
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(bytes))
  } catch (e) {
    return [{
      error: "INVALID_JSON",
      error_type: "JSON_SCHEMA_ERROR",
      message: `The flow JSON is not valid JSON: ${e instanceof Error ? e.message : String(e)}`,
      line_start: 1,
      line_end: 1,
      column_start: 1,
      column_end: 1
    }]
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || !("version" in parsed)) {
    return [{
      error: "MISSING_REQUIRED_PROPERTY",
      error_type: "JSON_SCHEMA_ERROR",
      message: "The required property \"version\" is missing at \"$root\".",
      line_start: 1,
      line_end: 1,
      column_start: 1,
      column_end: 2
    }]
  }
  return []
}

export const makeFlowStore = () => {
  const flows = new Map<string, Flow>()
  const seeded = new Set<string>()

  const seed = (wabaId: string) => {
    if (seeded.has(wabaId)) return
    seeded.add(wabaId)
    const make = (name: string, status: Flow["status"], category: string) => {
      const flow: Flow = {
        id: stableNumericId(`flow:${wabaId}:${name}`),
        wabaId,
        name,
        status,
        categories: [category],
        validationErrors: [],
        assets: new Map([["flow.json", { name: "flow.json", assetType: "FLOW_JSON", bytes: SEED_FLOW_JSON }]])
      }
      flows.set(flow.id, flow)
    }
    make("sandbox_survey", "PUBLISHED", "SURVEY")
    make("sandbox_signup", "DRAFT", "SIGN_UP")
  }

  const find = (target: UpstreamTarget, flowId: string, method: "get" | "post") =>
    Effect.gen(function*() {
      yield* checkReserved(target.wabaId, flowId)
      seed(target.wabaId)
      const flow = flows.get(flowId)
      if (flow === undefined || flow.wabaId !== target.wabaId) return yield* Effect.fail(unknownObject(flowId, method))
      return flow
    })

  const render = (flow: Flow): JsonObject => ({
    id: flow.id,
    name: flow.name,
    status: flow.status,
    categories: [...flow.categories],
    validation_errors: [...flow.validationErrors]
  })

  const list = (target: UpstreamTarget, query: GraphQuery): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      yield* checkReserved(target.wabaId)
      seed(target.wabaId)
      const items = [...flows.values()].filter((f) => f.wabaId === target.wabaId).map(render)
      return yield* page(items, query, { link: `https://graph.facebook.com/v23.0/${target.wabaId}/flows` })
    })

  const assets = (target: UpstreamTarget, flowId: string): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      const flow = yield* find(target, flowId, "get")
      const items: Array<JsonObject> = [...flow.assets.values()].map((asset) => ({
        name: asset.name,
        asset_type: asset.assetType,
        download_url: `${MEDIA_URL_BASE}flows/${flow.id}/${encodeURIComponent(asset.name)}`
      }))
      return yield* page(items, {}, { link: `https://graph.facebook.com/v23.0/${flow.id}/assets` })
    })

  const upload = (
    target: UpstreamTarget,
    flowId: string,
    asset: { readonly name: string; readonly assetType: "FLOW_JSON" | "IMAGE"; readonly file: UploadFile }
  ): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      const flow = yield* find(target, flowId, "post")
      yield* checkReserved(asset.file.filename)
      if (asset.name.trim() === "") return yield* Effect.fail(invalidParameter("The parameter name is required."))
      const bytes = new Uint8Array(yield* Effect.promise(() => asset.file.content.arrayBuffer()))
      const errors = asset.assetType === "FLOW_JSON" ? validateFlowJson(bytes) : []
      flow.assets.set(asset.name, { name: asset.name, assetType: asset.assetType, bytes })
      if (asset.assetType === "FLOW_JSON") flow.validationErrors = errors
      const validationErrors: Array<Json> = [...errors]
      return { success: true, validation_errors: validationErrors }
    })

  const deprecate = (target: UpstreamTarget, flowId: string): Effect.Effect<JsonObject, UpstreamError> =>
    Effect.gen(function*() {
      const flow = yield* find(target, flowId, "post")
      if (flow.status !== "PUBLISHED") {
        return yield* Effect.fail(invalidParameter(
          "Invalid parameter",
          `Flow ${flow.id} is ${flow.status}: only a PUBLISHED flow can be deprecated.`
        ))
      }
      flow.status = "DEPRECATED"
      return { success: true }
    })

  return { list, assets, upload, deprecate }
}

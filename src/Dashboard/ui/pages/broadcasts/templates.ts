/** The templates a broadcast can send: the approved ones listed, each keyed and its body's text. */
import { type ApiResult, call } from "../../api.js"
import type { TemplateRecord } from "../../types.js"

/** The approved templates of the instance's business account (GET /templates, every page). */
export const approvedTemplates = async (): Promise<ApiResult<ReadonlyArray<TemplateRecord>>> => {
  const found: Array<TemplateRecord> = []
  let after: string | undefined
  for (let page = 0; page < 10; page++) {
    const answer = await call<{
      readonly data: ReadonlyArray<TemplateRecord>
      readonly paging?: { readonly cursors?: { readonly after?: string }; readonly next?: unknown }
    }>("GET", "/templates", { query: { status: "APPROVED", limit: 100, after } })
    if (!answer.ok) return answer
    found.push(...answer.value.data.filter((t) => t.status === undefined || t.status === "APPROVED"))
    after = answer.value.paging?.cursors?.after
    if (after === undefined || answer.value.paging?.next === undefined) break
  }
  return { ok: true, value: found }
}

export const templateKey = (t: TemplateRecord) => `${t.name ?? ""}|${t.language ?? ""}`

export const bodyText = (template: TemplateRecord) => {
  const body = (template.components ?? []).find((c) => String(c.type).toUpperCase() === "BODY")
  return typeof body?.text === "string" ? body.text : undefined
}

/**
 * Creating a broadcast from the form: its fields checked into the hub's request, then sent in calls
 * of 1,000 recipients with the progress told, and its page opened once every recipient is in.
 */
import { useState } from "preact/hooks"
import { type ApiError, type ApiResult, call } from "../../api.js"
import { isoOfLocalInput } from "../../components.js"
import { chunksOf, type ReadRecipients, RECIPIENTS_PER_CALL } from "../../recipients.js"
import { navigate } from "../../router.js"
import type { Broadcast, NewBroadcast, RecipientsAdded } from "../../types.js"
import { numbers } from "./display.js"
import type { When } from "./TimingFields.js"

/** The form's fields as they are typed. */
interface BroadcastFields {
  readonly name: string
  readonly instanceId: string
  readonly templateName: string
  readonly language: string
  readonly read: ReadRecipients | undefined
  readonly when: When
  readonly sendAt: string
  readonly validity: string
}

type BroadcastRequest = Omit<NewBroadcast, "recipients">

/** The broadcast to create and its recipients, or why the form cannot be sent yet (in the order a person fixes it). */
const checkedBroadcast = (fields: BroadcastFields):
  | { readonly ok: true; readonly base: BroadcastRequest; readonly recipients: NewBroadcast["recipients"] }
  | { readonly ok: false; readonly refusal: string } =>
{
  const { read, when } = fields
  if (fields.templateName === "" || fields.language === "") {
    return { ok: false, refusal: "Choose the template to send." }
  }
  if (read !== undefined && read.problems.length > 0) {
    return { ok: false, refusal: "Fix the rows listed under the recipients first." }
  }
  if (read === undefined || read.recipients.length === 0) {
    return { ok: false, refusal: "Add the recipients: paste or upload a CSV." }
  }
  const at = when === "later" ? isoOfLocalInput(fields.sendAt) : undefined
  if (when === "later" && at === undefined) return { ok: false, refusal: "Give the date and time to send at." }
  const base: BroadcastRequest = {
    name: fields.name.trim(),
    template: { name: fields.templateName, language: { code: fields.language } },
    ...(at === undefined ? {} : { send_at: at }),
    ...(fields.validity.trim() === "" ? {} : { validity: Number(fields.validity) }),
    ...(fields.instanceId === "" ? {} : { instance_id: fields.instanceId })
  }
  return { ok: true, base, recipients: read.recipients }
}

/** Sends the recipients in calls of 1,000: the first creates the broadcast, the others add to it; a 429 or 503 is waited out. */
const createInChunks = async (
  base: BroadcastRequest,
  recipients: NewBroadcast["recipients"],
  progress: (added: number) => void
): Promise<{ readonly broadcast?: Broadcast; readonly added: number; readonly error?: ApiError }> => {
  const chunks = chunksOf(recipients, RECIPIENTS_PER_CALL)
  const withRetries = async <A extends unknown>(attempt: () => Promise<ApiResult<A>>) => {
    for (let tries = 1;; tries++) {
      const result = await attempt()
      if (result.ok || tries >= 5 || (result.error.status !== 429 && result.error.status !== 503)) return result
      progress(-1)
      await new Promise((resolve) => setTimeout(resolve, 1000 * Math.min(60, result.error.retryAfterSeconds ?? 5)))
    }
  }
  const [first, ...rest] = chunks
  if (first === undefined) return { added: 0 }
  const created = await withRetries(() =>
    call<Broadcast>("POST", "/api/broadcasts", { json: { ...base, recipients: first } })
  )
  if (!created.ok) return { added: 0, error: created.error }
  let added = first.length
  progress(added)
  for (const chunk of rest) {
    const more = await withRetries(() =>
      call<RecipientsAdded>("POST", `/api/broadcasts/${encodeURIComponent(created.value.id)}/recipients`, {
        json: { recipients: chunk }
      })
    )
    if (!more.ok) return { broadcast: created.value, added, error: more.error }
    added += chunk.length
    progress(added)
  }
  return { broadcast: created.value, added }
}

/**
 * Creates the broadcast the fields describe, telling its progress; opens its page when done. When only
 * some recipients were added, it stays with an error that says how many.
 */
export const useBroadcastCreation = (onCreated: () => void) => {
  const [busy, setBusy] = useState(false)
  const [progress, setProgress] = useState<string | undefined>(undefined)
  const [error, setError] = useState<ApiError | undefined>(undefined)

  const create = async (fields: BroadcastFields) => {
    setError(undefined)
    const checked = checkedBroadcast(fields)
    if (!checked.ok) return setError({ status: 0, code: undefined, message: checked.refusal })
    const total = checked.recipients.length
    setBusy(true)
    setProgress(`Creating the broadcast with ${numbers.format(Math.min(total, RECIPIENTS_PER_CALL))} recipients…`)
    const outcome = await createInChunks(checked.base, checked.recipients, (added) =>
      setProgress(
        added < 0
          ? "The hub asked to wait (its queue is full): trying again shortly…"
          : `Added ${numbers.format(added)} of ${numbers.format(total)} recipients…`
      ))
    setBusy(false)
    setProgress(undefined)
    if (outcome.broadcast === undefined) return setError(outcome.error)
    onCreated()
    const id = encodeURIComponent(outcome.broadcast.id)
    if (outcome.error !== undefined) {
      setError({
        ...outcome.error,
        message: `Broadcast “${outcome.broadcast.name}” was created with ${numbers.format(outcome.added)} of ${
          numbers.format(total)
        } recipients; adding the rest failed: ${outcome.error.message}`
      })
      return
    }
    navigate(`/broadcasts/${id}`)
  }

  return { busy, progress, error, create }
}

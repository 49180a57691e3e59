/** A webhook's custom headers, edited; a secret one's value stays hidden unless replaced. */
import { useEffect, useState } from "preact/hooks"
import { call } from "../../api.js"
import { ErrorNote, Outcome, useAction } from "../../components.js"
import type { Webhook } from "../../types.js"
import { type HeaderRow, HeadersField, headersOf, rowsOf } from "../WebhookFields.js"
import type { SectionProps } from "./SectionProps.js"

export const CustomHeaders = (props: SectionProps) => {
  const { webhook } = props
  const [rows, setRows] = useState<ReadonlyArray<HeaderRow>>(() => rowsOf(webhook.headers))
  const [edited, setEdited] = useState(false)
  const { error, outcome, busy, run, setError } = useAction()
  const shown = JSON.stringify(webhook.headers)
  useEffect(() => {
    setRows(rowsOf(webhook.headers))
    setEdited(false)
  }, [shown])
  const save = (event: Event) => {
    event.preventDefault()
    // A secret header left redacted is sent as the placeholder, which keeps its stored value.
    void run(
      () => call<Webhook>("PATCH", `/api/webhooks/${webhook.id}`, { json: { headers: headersOf(rows) } }),
      (record) => {
        props.onChanged(record)
        setRows(rowsOf(record.headers))
        setEdited(false)
        const count = Object.keys(record.headers).length
        return count === 0
          ? "Saved: no custom headers."
          : `Saved: ${count} custom ${count === 1 ? "header" : "headers"}.`
      }
    )
  }
  return (
    <form class="stack" aria-label="Its custom headers" onSubmit={save}>
      <HeadersField
        id="edit-headers"
        legendHidden
        rows={rows}
        onChange={(next) => {
          setRows(next)
          setEdited(true)
        }}
      />
      <ErrorNote error={error} prefix="Not saved:" />
      <Outcome text={outcome} />
      <div class="actions-row">
        <button type="submit" disabled={busy || !edited}>Save headers</button>
        {edited
          ? (
            <button
              type="button"
              class="secondary"
              onClick={() => {
                setRows(rowsOf(webhook.headers))
                setEdited(false)
                setError(undefined)
              }}
            >
              Undo changes
            </button>
          )
          : null}
      </div>
    </form>
  )
}

/** Queues a webhook's failed and dead deliveries of a time window again (POST /api/webhooks/:id/recover). */
import { useState } from "preact/hooks"
import type { RECOVER_MAX } from "../../../../Webhooks/Api.js"
import { call } from "../../api.js"
import { ErrorNote, isoOfLocalInput, localInputOf, Outcome, Time, useAction } from "../../components.js"
import { countText } from "../../paging.js"
import type { RecoverOutcome } from "../../types.js"
import type { SectionProps } from "./SectionProps.js"
import { TimeWindowFields } from "./TimeWindow.js"

/** Most deliveries one recover call queues (the type checks it is the hub's value). */
const RECOVER_LIMIT: typeof RECOVER_MAX = 10_000

const DAY_MS = 24 * 3600_000

export const Recover = (props: SectionProps) => {
  const { webhook } = props
  const [since, setSince] = useState(() => localInputOf(new Date(Date.now() - DAY_MS).toISOString()))
  const [until, setUntil] = useState("")
  const [recovered, setRecovered] = useState<RecoverOutcome | undefined>(undefined)
  const { error, outcome, busy, run, setError } = useAction()

  const recover = (window: { readonly since: string; readonly until?: string | undefined }) =>
    run(() => call<RecoverOutcome>("POST", `/api/webhooks/${webhook.id}/recover`, { json: window }), (answer) => {
      setRecovered(answer)
      if (answer.requeued > 0) props.onQueued()
      return answer.requeued === 0
        ? "Nothing to recover: no failed or dead delivery in that window waits to be sent."
        : `Queued ${countText(answer.requeued, false)} ${
          answer.requeued === 1 ? "delivery" : "deliveries"
        } again, each with its original webhook-id.`
    })
  const submit = (event: Event) => {
    event.preventDefault()
    const from = isoOfLocalInput(since)
    const to = isoOfLocalInput(until)
    if (from === undefined) {
      return setError({ status: 0, code: undefined, message: "Give the start of the window (a date and time)." })
    }
    void recover({ since: from, ...(to === undefined ? {} : { until: to }) })
  }
  return (
    <form class="stack" aria-label="Recover failed deliveries" onSubmit={submit}>
      <p>
        Queues again every failed or dead delivery created in the window, oldest first, at most{" "}
        {countText(RECOVER_LIMIT, false)} a call, each with its original{" "}
        <code>webhook-id</code>. What is queued already is not queued twice.
      </p>
      <TimeWindowFields
        id="recover"
        what="Created"
        since={since}
        until={until}
        onSince={setSince}
        onUntil={setUntil}
      />
      <ErrorNote error={error} prefix="Not recovered:" />
      <Outcome text={outcome} />
      {recovered === undefined || busy ? null : (
        <p class="muted small">
          Window: <Time iso={recovered.since} /> to <Time iso={recovered.until} />.
        </p>
      )}
      {recovered?.more === true && !busy
        ? (
          <div class="note note-info">
            <p>More failed or dead deliveries wait in this window.</p>
            <button
              type="button"
              class="secondary"
              onClick={() => void recover({ since: recovered.since, until: recovered.until })}
            >
              Recover the next ones
            </button>
          </div>
        )
        : null}
      <div>
        <button type="submit" disabled={busy || !webhook.active}>
          {busy ? "Recovering…" : "Recover failed deliveries"}
        </button>
      </div>
      {webhook.active
        ? null
        : <p class="help">Activate it under Settings first: an inactive webhook's deliveries are not sent.</p>}
    </form>
  )
}

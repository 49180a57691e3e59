/**
 * A poll webhook's events, read as a consumer reads them (GET /api/webhooks/:id/poll): a page at a
 * time from a cursor, each with the headers a push would carry.
 */
import { useState } from "preact/hooks"
import { call } from "../../api.js"
import { ErrorNote, Outcome, Time, useAction } from "../../components.js"
import type { PollAnswer } from "../../types.js"
import type { SectionProps } from "./SectionProps.js"

/** Events read per page here (a consumer may ask up to 500). */
const PAGE = 20

export const PollEvents = (props: SectionProps) => {
  const { webhook } = props
  const [answer, setAnswer] = useState<PollAnswer | undefined>(undefined)
  const [cursor, setCursor] = useState<string | null>(null)
  const { error, outcome, busy, run } = useAction()
  const read = (from: string | null) =>
    run(
      () =>
        call<PollAnswer>("GET", `/api/webhooks/${webhook.id}/poll`, {
          query: { limit: PAGE, ...(from === null ? {} : { cursor: from }) }
        }),
      (page) => {
        setAnswer(page)
        if (page.next_cursor !== null) setCursor(page.next_cursor)
        return page.data.length === 0 ? "No new event." : undefined
      }
    )
  return (
    <div class="stack">
      <p>
        Nothing is pushed to this webhook: its events wait in the hub (for HUB_RETENTION) and are read in order with
        {" "}
        <code>GET /api/webhooks/{webhook.id}/poll?cursor=…&amp;wait=30</code>, each with the body and the{" "}
        <code>webhook-signature</code> a push would carry (verify it with the webhook's secret).
      </p>
      <ErrorNote error={error} prefix="Not read:" />
      <Outcome text={outcome} />
      {answer === undefined || answer.data.length === 0 ? null : (
        <ol class="stack" aria-label="Polled events">
          {answer.data.map((event) => (
            <li key={event.event_id}>
              <p class="small">
                <Time iso={event.received_at} /> <span class="mono">{event.headers["webhook-id"]}</span>
              </p>
              <pre class="mono small truncate">{event.body}</pre>
            </li>
          ))}
        </ol>
      )}
      <div class="row">
        <button type="button" disabled={busy || !webhook.active} onClick={() => void read(null)}>
          Read from the start
        </button>
        <button
          type="button"
          class="secondary"
          disabled={busy || !webhook.active || cursor === null}
          onClick={() => void read(cursor)}
        >
          {answer?.more === true ? "Read the next ones" : "Read newer ones"}
        </button>
      </div>
    </div>
  )
}

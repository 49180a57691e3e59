import { useState } from "preact/hooks"
import { Badge, formatTime, PageTitle, Time } from "../components.js"
import { useInstances } from "../instances.js"
import { changeLines, type Connection, liveFeed, useLiveFeed } from "../live.js"
import type { TokenKind } from "../types.js"

const ConnectionState = (props: { readonly connection: Connection }) => {
  const c = props.connection
  switch (c.state) {
    case "open":
      return (
        <p class="note note-ok" role="status">
          <Badge tone="ok">connected</Badge> Listening since {formatTime(c.since)}: new events appear at the top.
        </p>
      )
    case "connecting":
    case "off":
      return <p class="note note-info" role="status">Connecting…</p>
    case "retrying":
      return <p class="note note-warn" role="status">{c.error.message}. Connecting again in {c.inSeconds} s.</p>
    case "refused":
      return <p class="note note-error" role="alert">{c.error.message}</p>
  }
}

export const LiveEventsPage = (props: { readonly kind: TokenKind }) => {
  const { entries, connection } = useLiveFeed()
  const instances = useInstances(props.kind)
  const [instanceId, setInstanceId] = useState("")
  const known = instances.loaded.state === "ready" ? instances.loaded.value.data : []
  const nameOf = (id: string) => known.find((i) => i.id === id)?.name ?? id
  const shown = entries.filter((entry) =>
    instanceId === "" || entry.kind !== "event" || entry.event.instanceId === instanceId
  )
  return (
    <main id="main">
      <PageTitle lead="The upstream changes for your instances, as the hub commits them (the envelopes your webhooks receive).">
        Live events
      </PageTitle>
      <ConnectionState connection={connection} />
      <div class="toolbar">
        {props.kind === "organization" ?
          (
            <div class="field inline">
              <label for="live-instance">Instance</label>
              <select id="live-instance" value={instanceId} onChange={(e) => setInstanceId(e.currentTarget.value)}>
                <option value="">All instances</option>
                {known.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
              </select>
            </div>
          ) :
          null}
        <button type="button" class="secondary" onClick={() => liveFeed.clear()} disabled={entries.length === 0}>
          Clear
        </button>
      </div>
      <p class="visually-hidden" aria-live="polite">{shown.length === 0 ? "" : `${shown.length} events`}</p>
      {shown.length === 0 ?
        <p class="muted">Nothing yet. Send a message or simulate an inbound one, and its events arrive here.</p> :
        (
          <ol class="feed" aria-label="Events, newest first">
            {shown.map((entry) =>
              entry.kind === "dropped"
                ? (
                  <li key={`dropped-${entry.at}`} class="feed-item dropped">
                    <Badge tone="warn">dropped</Badge> {entry.message}
                  </li>
                )
                : (
                  <li key={entry.event.id} class="feed-item">
                    <div class="feed-head">
                      <Time iso={entry.event.receivedAt} />
                      <span class="muted">{nameOf(entry.event.instanceId)}</span>
                      <span class="mono small muted">{entry.event.id}</span>
                    </div>
                    <ul class="changes">
                      {changeLines(entry.event.payload).map((line, index) => (
                        <li key={index}>
                          <Badge tone="neutral">{line.field}</Badge> {line.summary}
                        </li>
                      ))}
                    </ul>
                    <details>
                      <summary>Payload</summary>
                      <pre class="payload">{JSON.stringify(entry.event.payload, null, 2)}</pre>
                    </details>
                  </li>
                )
            )}
          </ol>
        )}
    </main>
  )
}

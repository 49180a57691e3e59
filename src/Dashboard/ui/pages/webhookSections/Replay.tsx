/**
 * Replays a window of the webhook's stored events (POST /api/webhooks/:id/replay) and follows the
 * replay's deliveries (GET /api/webhooks/:id/replays/:replayId) until none is queued.
 */
import { useState } from "preact/hooks"
import { call } from "../../api.js"
import { ErrorNote, isoOfLocalInput, localInputOf, Outcome, useAction, usePolling } from "../../components.js"
import { countText } from "../../paging.js"
import type { ReplayRecord } from "../../types.js"
import { choiceOf, EventKindsField, eventsOf, type KindsChoice } from "../WebhookFields.js"
import type { SectionProps } from "./SectionProps.js"
import { TimeWindowFields } from "./TimeWindow.js"

const HOUR_MS = 3600_000

/** While a replay's deliveries are queued, its progress is read again this often. */
const PROGRESS_MS = 1500

interface ReplayAsked {
  readonly since: string
  readonly until?: string | undefined
  readonly events?: ReadonlyArray<string> | undefined
  readonly cursor?: string | undefined
}

const deliveriesText = (n: number) => `${countText(n, false)} ${n === 1 ? "delivery" : "deliveries"}`

/** A replay's deliveries by outcome, read again while some are queued. */
const ReplayProgress = (props: { readonly webhookId: string; readonly replay: ReplayRecord }) => {
  const [replay, setReplay] = useState(props.replay)
  const reload = async () => {
    const read = await call<ReplayRecord>("GET", `/api/webhooks/${props.webhookId}/replays/${replay.id}`)
    if (read.ok) setReplay(read.value)
  }
  usePolling(replay.deliveries.queued > 0, reload, PROGRESS_MS, replay)
  const { queued, delivered, failed } = replay.deliveries
  return (
    <p class="muted small" aria-live="polite" data-testid="replay-progress">
      Replay <span class="mono">{replay.id}</span>: {countText(queued, false)} queued, {countText(delivered, false)}
      {" "}
      delivered, {countText(failed, false)} failed.
    </p>
  )
}

export const Replay = (props: SectionProps) => {
  const { webhook } = props
  const [since, setSince] = useState(() => localInputOf(new Date(Date.now() - HOUR_MS).toISOString()))
  const [until, setUntil] = useState("")
  const [kinds, setKinds] = useState<KindsChoice>(() => choiceOf(webhook.events))
  const [replay, setReplay] = useState<{ readonly asked: ReplayAsked; readonly record: ReplayRecord } | undefined>()
  const { error, outcome, busy, run, setError } = useAction()

  const start = (asked: ReplayAsked) =>
    run(() => call<ReplayRecord>("POST", `/api/webhooks/${webhook.id}/replay`, { json: asked }), (record) => {
      setReplay({ asked, record })
      if (record.queued > 0) props.onQueued()
      const already = record.already_queued === 0 ? "" : ` (${countText(record.already_queued, false)} queued already)`
      return record.queued === 0
        ? `Nothing to replay in that window${already}.`
        : `Queued ${
          deliveriesText(record.queued)
        }${already}; one delivered before goes again with its original webhook-id.`
    })
  const submit = (event: Event) => {
    event.preventDefault()
    const from = isoOfLocalInput(since)
    const to = isoOfLocalInput(until)
    if (from === undefined) {
      return setError({ status: 0, code: undefined, message: "Give the start of the window (a date and time)." })
    }
    void start({
      since: from,
      ...(to === undefined ? {} : { until: to }),
      ...(kinds.every ? {} : { events: eventsOf(kinds) })
    })
  }
  return (
    <form class="stack" aria-label="Replay events" onSubmit={submit}>
      <p>
        Delivers again every stored event of the window that this webhook takes: delivered before (with its original
        {" "}
        <code>webhook-id</code>, so the receiver dedupes it), failed, or received before the webhook existed. Live
        events go first; the replay takes the slots they leave.
      </p>
      <TimeWindowFields
        id="replay"
        what="Received"
        since={since}
        until={until}
        onSince={setSince}
        onUntil={setUntil}
        note=" At most HUB_RETENTION back."
      />
      <EventKindsField id="replay-kinds" value={kinds} onChange={setKinds} />
      <ErrorNote error={error} prefix="Not replayed:" />
      <Outcome text={outcome} />
      {replay === undefined || busy
        ? null
        : <ReplayProgress key={replay.record.id} webhookId={webhook.id} replay={replay.record} />}
      {replay?.record.next_cursor != null && !busy
        ? (
          <div class="note note-info">
            <p>More events wait in this window (one call replays at most HUB_REPLAY_MAX).</p>
            <button
              type="button"
              class="secondary"
              onClick={() => void start({ ...replay.asked, cursor: replay.record.next_cursor ?? undefined })}
            >
              Replay the next ones
            </button>
          </div>
        )
        : null}
      <div>
        <button type="submit" disabled={busy || !webhook.active}>{busy ? "Replaying…" : "Replay events"}</button>
      </div>
      {webhook.active
        ? null
        : <p class="help">Activate it under Settings first: an inactive webhook's deliveries are not sent.</p>}
    </form>
  )
}

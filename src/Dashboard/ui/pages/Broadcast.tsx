/**
 * A broadcast's page: its facts and counts, its progress as a chart of the counts this page read
 * every few seconds while open (the API gives the counts now, not their history), its failures by
 * reason, its recipients by status, and Cancel.
 */
import { useEffect, useRef, useState } from "preact/hooks"
import { call } from "../api.js"
import {
  Badge,
  ConfirmButton,
  ErrorNote,
  Outcome,
  PageTitle,
  Resource,
  Time,
  type Tone,
  useAction,
  usePolling,
  useResource
} from "../components.js"
import { LineChart } from "../LineChart.js"
import type { Sample, Series } from "../lineChartModel.js"
import { Link } from "../router.js"
import { statusLines } from "../statusLines.js"
import type { Broadcast, BroadcastCounts, RecipientPage } from "../types.js"
import { broadcastTone, duration } from "./broadcasts/display.js"

/** How often the page reads the broadcast again while it is open. */
const SAMPLE_MS = 3_000
/** The samples the chart keeps (a run of equal samples is kept as its first and last). */
const MAX_SAMPLES = 600
const numbers = new Intl.NumberFormat("en")

type Counted = Exclude<keyof BroadcastCounts, "recipients">

const SERIES: ReadonlyArray<Series & { readonly key: Counted; readonly tone: Tone; readonly help: string }> = [
  { key: "pending", label: "pending", ...statusLines.pending, tone: "neutral", help: "waiting in the queue" },
  { key: "sent", label: "sent", ...statusLines.sent, tone: "info", help: "accepted by Meta" },
  { key: "delivered", label: "delivered", ...statusLines.delivered, tone: "ok", help: "on the person's phone" },
  { key: "read", label: "read", ...statusLines.read, tone: "ok", help: "opened by the person" },
  { key: "failed", label: "failed", ...statusLines.failed, tone: "bad", help: "not sent or not delivered" },
  { key: "skipped", label: "skipped", ...statusLines.skipped, tone: "warn", help: "not sent: opted out" }
]

/** Why recipients failed or were skipped, in words. */
const REASONS: Readonly<Record<string, string>> = {
  expired: "Expired: its validity ended before its turn came",
  cancelled: "Cancelled: taken off the queue by a cancel",
  refused: "Refused: Meta refused the send",
  outcome_unknown: "Outcome unknown: the send may have reached Meta without an answer, so it was not sent again",
  opted_out: "Opted out: the person stopped the business's marketing messages (skipped)",
  failed: "Failed: Meta reported the message failed"
}

const RECIPIENT_STATUSES = ["pending", "sent", "delivered", "read", "failed", "skipped"] as const

const recipientTone = (status: string): Tone =>
  status === "read" || status === "delivered"
    ? "ok"
    : status === "failed"
    ? "bad"
    : status === "sent"
    ? "info"
    : status === "skipped"
    ? "warn"
    : "neutral"

/** The counts as a chart's sample; a run of equal samples keeps only its first and its newest. */
const withSample = (samples: ReadonlyArray<Sample>, broadcast: Broadcast, at: number): ReadonlyArray<Sample> => {
  const values: Record<string, number> = {}
  for (const line of SERIES) values[line.key] = broadcast.counts[line.key]
  const same = (s: Sample | undefined) => s !== undefined && SERIES.every((l) => s.values[l.key] === values[l.key])
  const last = samples[samples.length - 1]
  const kept = same(last) && same(samples[samples.length - 2]) ? samples.slice(0, -1) : samples
  return [...kept, { at, values }].slice(-MAX_SAMPLES)
}

const Counts = (props: { readonly broadcast: Broadcast }) => (
  <ul class="stats">
    <li class="stat stat-info">
      <span class="stat-value">{numbers.format(props.broadcast.counts.recipients)}</span>{" "}
      <span class="stat-label">recipients</span> <span class="stat-help">in the broadcast</span>
    </li>
    {SERIES.map((line) => (
      <li key={line.key} class={`stat stat-${line.tone === "neutral" ? "info" : line.tone}`}>
        <span class="stat-value">{numbers.format(props.broadcast.counts[line.key])}</span>{" "}
        <span class="stat-label">{line.label}</span> <span class="stat-help">{line.help}</span>
      </li>
    ))}
  </ul>
)

const Failures = (props: { readonly failures: Broadcast["failures"] }) => {
  const reasons = Object.entries(props.failures).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1])
  if (reasons.length === 0) return <p class="muted">No recipient has failed or been skipped.</p>
  return (
    <div class="table-wrap">
      <table>
        <caption class="visually-hidden">Failed and skipped recipients by reason</caption>
        <thead>
          <tr>
            <th scope="col">Reason</th>
            <th scope="col">Recipients</th>
          </tr>
        </thead>
        <tbody>
          {reasons.map(([reason, n]) => (
            <tr key={reason}>
              <td>
                <span class="mono">{reason}</span> <span class="muted small">{REASONS[reason] ?? ""}</span>
              </td>
              <td>{numbers.format(n)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

const RECIPIENTS_LIMIT = 50

/**
 * The recipients as added, with their send's status; a status filters; Next follows the answer's cursor.
 * The page shown is read again in place whenever `refresh` changes (the broadcast's counts moved).
 */
const Recipients = (props: { readonly id: string; readonly refresh: string }) => {
  const [status, setStatus] = useState("")
  // The cursors of the pages walked so far ("" for the first), so Previous goes back one.
  const [cursors, setCursors] = useState<ReadonlyArray<string>>([""])
  const after = cursors[cursors.length - 1] ?? ""
  const page = useResource(
    () =>
      call<RecipientPage>("GET", `/api/broadcasts/${encodeURIComponent(props.id)}/recipients`, {
        query: { status, limit: RECIPIENTS_LIMIT, after }
      }),
    JSON.stringify([status, after])
  )
  const first = useRef(true)
  useEffect(() => {
    if (first.current) first.current = false
    else void page.reload()
  }, [props.refresh])
  return (
    <div class="stack">
      <div class="field inline">
        <label for="r-status">Status</label>
        <select
          id="r-status"
          value={status}
          onChange={(e) => {
            setStatus(e.currentTarget.value)
            setCursors([""])
          }}
        >
          <option value="">Any</option>
          {RECIPIENT_STATUSES.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <button type="button" class="secondary" onClick={() => void page.reload()}>Refresh</button>
      </div>
      <Resource loaded={page.loaded} what="the recipients">
        {(list) => (
          <>
            <div class="table-wrap">
              <table class="responsive">
                <caption class="visually-hidden">Recipients{status === "" ? "" : ` ${status}`}</caption>
                <thead>
                  <tr>
                    <th scope="col">Recipient</th>
                    <th scope="col">Status</th>
                    <th scope="col">Reason</th>
                    <th scope="col">Message record</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.map((r) => (
                    <tr key={r.to}>
                      <td data-label="Recipient" class="mono">
                        <Link to={`/messages?user=${encodeURIComponent(r.to)}`}>
                          <span class="visually-hidden">Every message with{" "}</span>
                          {r.to}
                        </Link>
                      </td>
                      <td data-label="Status">
                        <Badge tone={recipientTone(r.status)}>{r.status}</Badge>
                      </td>
                      <td data-label="Reason">{r.failure_reason ?? <span class="muted">—</span>}</td>
                      <td data-label="Message record" class="mono small">
                        {r.message_id ?? <span class="muted">none: not sent</span>}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              {list.data.length === 0 ? <p class="muted">No recipients{status === "" ? "" : ` ${status}`}.</p> : null}
            </div>
            <nav class="pager" aria-label="Pages of recipients">
              <button
                type="button"
                class="secondary"
                disabled={cursors.length <= 1}
                onClick={() => setCursors(cursors.slice(0, -1))}
              >
                ← Previous
              </button>
              <span aria-live="polite">Page {cursors.length}</span>
              <button
                type="button"
                class="secondary"
                disabled={list.next === null}
                onClick={() => list.next !== null && setCursors([...cursors, list.next])}
              >
                Next →
              </button>
            </nav>
          </>
        )}
      </Resource>
    </div>
  )
}

const Facts = (props: { readonly broadcast: Broadcast }) => {
  const { broadcast } = props
  return (
    <dl class="facts">
      <div>
        <dt>Broadcast id</dt>
        <dd class="mono">{broadcast.id}</dd>
      </div>
      <div>
        <dt>Template</dt>
        <dd class="mono">{broadcast.template.name} ({broadcast.template.language.code})</dd>
      </div>
      <div>
        <dt>Instance</dt>
        <dd class="mono">{broadcast.instance_id}</dd>
      </div>
      <div>
        <dt>Created</dt>
        <dd>
          <Time iso={broadcast.created_at} />
        </dd>
      </div>
      <div>
        <dt>Sends from</dt>
        <dd>{broadcast.send_at === null ? "at once" : <Time iso={broadcast.send_at} />}</dd>
      </div>
      <div>
        <dt>Validity</dt>
        <dd>{broadcast.validity === null ? "the hub's default" : duration(broadcast.validity)}</dd>
      </div>
      {broadcast.cancelled_at === null ? null : (
        <div>
          <dt>Cancelled</dt>
          <dd>
            <Time iso={broadcast.cancelled_at} />
          </dd>
        </div>
      )}
    </dl>
  )
}

export const BroadcastPage = (props: { readonly id: string }) => {
  const path = `/api/broadcasts/${encodeURIComponent(props.id)}`
  const loaded = useResource(() => call<Broadcast>("GET", path), props.id)
  const [samples, setSamples] = useState<ReadonlyArray<Sample>>([])
  const cancel = useAction()
  const broadcast = loaded.loaded.state === "ready" ? loaded.loaded.value : undefined
  // Every reading of the broadcast is a sample of the chart.
  useEffect(() => {
    if (broadcast !== undefined) setSamples((before) => withSample(before, broadcast, Date.now()))
  }, [broadcast])
  usePolling(true, loaded.reload, SAMPLE_MS, loaded.loaded)
  const open = broadcast?.status === "scheduled" || broadcast?.status === "sending"

  return (
    <main id="main">
      <p class="breadcrumb">
        <Link to="/broadcasts">← Broadcasts</Link>
      </p>
      <Resource loaded={loaded.loaded} what="the broadcast">
        {(b) => (
          <>
            <PageTitle lead={`${numbers.format(b.counts.recipients)} recipients`}>
              {b.name} <Badge tone={broadcastTone(b.status)}>{b.status}</Badge>
            </PageTitle>
            <Facts broadcast={b} />
            {open
              ? (
                <div class="actions-row">
                  <ConfirmButton
                    label="Cancel broadcast"
                    confirmLabel="Cancel its unsent messages"
                    question="Take every send not yet begun off the queue? Sends already made stay."
                    onConfirm={() =>
                      cancel.run(
                        () => call<Broadcast>("POST", `${path}/cancel`),
                        (cancelled) => {
                          loaded.replace(cancelled)
                          return `Broadcast cancelled: ${
                            numbers.format(cancelled.failures.cancelled ?? 0)
                          } sends taken off the queue.`
                        }
                      )}
                  />
                </div>
              )
              : null}
            <ErrorNote error={cancel.error} prefix="Not cancelled:" />
            <Outcome text={cancel.outcome} />
            <section class="card" aria-labelledby="progress-title">
              <h2 id="progress-title">Progress</h2>
              <Counts broadcast={b} />
              <p class="help">
                Each recipient is counted once, at their send's latest status (a message read is no longer counted as
                sent or delivered). The hub tells these counts as they are now, not their history: the chart is drawn
                from the counts this page has read every {SAMPLE_MS / 1000}{" "}
                seconds since it was opened, and starts again when the page is opened again.
              </p>
              <LineChart
                title={`Recipients of “${b.name}” by status, since this page was opened`}
                series={SERIES}
                samples={samples}
                tableCaption="Recipients by status at each reading, newest first"
              />
            </section>
            <section class="card" aria-labelledby="failures-title">
              <h2 id="failures-title">Failures by reason</h2>
              <Failures failures={b.failures} />
            </section>
            <section class="card" aria-labelledby="recipients-title">
              <h2 id="recipients-title">Recipients</h2>
              <Recipients id={props.id} refresh={JSON.stringify(b.counts)} />
            </section>
          </>
        )}
      </Resource>
    </main>
  )
}

/**
 * The overview, where the dashboard opens: the last hours minute by minute (GET /api/stats/timeseries),
 * as three charts, each with its numbers as a table: sends by status, webhook deliveries by outcome and
 * the send queue's depth. Read again while the page is open; an organization token may narrow it to one
 * instance.
 */
import { useMemo, useState } from "preact/hooks"
import { call } from "../api.js"
import { PageTitle, Resource, usePolling, useResource } from "../components.js"
import { useInstanceChoices } from "../instances.js"
import { LineChart } from "../LineChart.js"
import { clock, numbers, type Sample, type Series } from "../lineChartModel.js"
import { statusLines } from "../statusLines.js"
import type { MinuteBucket, Timeseries, TokenKind } from "../types.js"

/** How often the page reads the series again while it is open. */
const REFRESH_MS = 30_000
const WINDOWS = [1, 3, 6, 12, 24] as const

const SEND_SERIES: ReadonlyArray<Series & { readonly key: keyof MinuteBucket["sends"] }> = [
  { key: "pending", label: "pending", ...statusLines.pending },
  { key: "sent", label: "sent", ...statusLines.sent },
  { key: "delivered", label: "delivered", ...statusLines.delivered },
  { key: "read", label: "read", ...statusLines.read },
  { key: "failed", label: "failed", ...statusLines.failed }
]

const DELIVERY_SERIES: ReadonlyArray<Series & { readonly key: keyof MinuteBucket["deliveries"] }> = [
  { key: "succeeded", label: "succeeded", color: "#0a6b4d" },
  { key: "failed", label: "failed (retried)", color: "#8a5a00", dash: "8 4" },
  { key: "dead", label: "dead (given up)", color: "#b3261e", dash: "4 3" }
]

const QUEUE_SERIES: ReadonlyArray<Series> = [{ key: "queued", label: "queued", color: "#1b4a8a" }]

const samplesOf = (
  minutes: ReadonlyArray<MinuteBucket>,
  values: (minute: MinuteBucket) => Readonly<Record<string, number>>
): ReadonlyArray<Sample> => minutes.map((minute) => ({ at: Date.parse(minute.minute), values: values(minute) }))

const sum = (minutes: ReadonlyArray<MinuteBucket>, count: (minute: MinuteBucket) => number) =>
  minutes.reduce((total, minute) => total + count(minute), 0)

const hoursText = (hours: number) => (hours === 1 ? "hour" : `${hours} hours`)

/** The window's totals, in words and numbers, above the charts. */
const Totals = (props: { readonly series: Timeseries }) => {
  const { minutes } = props.series
  const sends = sum(minutes, (m) => SEND_SERIES.reduce((total, line) => total + m.sends[line.key], 0))
  const items = [
    { label: "sends", help: "accepted in the window", value: sends, tone: "info" },
    { label: "failed sends", help: "of those, failed now", value: sum(minutes, (m) => m.sends.failed), tone: "bad" },
    {
      label: "deliveries",
      help: "webhook attempts that succeeded",
      value: sum(minutes, (m) => m.deliveries.succeeded),
      tone: "ok"
    },
    {
      label: "failed attempts",
      help: "retried or given up",
      value: sum(minutes, (m) => m.deliveries.failed + m.deliveries.dead),
      tone: "warn"
    },
    {
      label: "most queued",
      help: "largest queue in the window",
      value: Math.max(0, ...minutes.map((m) => m.queue_depth)),
      tone: "info"
    }
  ]
  return (
    <ul class="stats overview-totals">
      {items.map((item) => (
        <li key={item.label} class={`stat stat-${item.tone}`}>
          <span class="stat-value">{numbers.format(item.value)}</span> <span class="stat-label">{item.label}</span>{" "}
          <span class="stat-help">{item.help}</span>
        </li>
      ))}
    </ul>
  )
}

const Charts = (props: { readonly series: Timeseries }) => {
  const { minutes, hours } = props.series
  const window = `over the last ${hoursText(hours)}`
  return (
    <>
      <section class="card" aria-labelledby="sends-title">
        <h2 id="sends-title">Sends per minute by status</h2>
        <p class="help">
          Messages sent or queued, by the minute the hub accepted them, counted at their status now (a message read
          counts as read, not as sent).
        </p>
        <LineChart
          title={`Sends per minute by status, ${window}`}
          series={SEND_SERIES}
          samples={samplesOf(minutes, (m) => m.sends)}
          tableCaption="Sends per minute by status; each row stands until the next, newest first"
          timeHeading="Minute"
        />
      </section>
      <section class="card" aria-labelledby="deliveries-title">
        <h2 id="deliveries-title">Webhook deliveries per minute by outcome</h2>
        <p class="help">Each delivery attempt to your webhooks, by the minute it began.</p>
        <LineChart
          title={`Webhook delivery attempts per minute by outcome, ${window}`}
          series={DELIVERY_SERIES}
          samples={samplesOf(minutes, (m) => m.deliveries)}
          tableCaption="Delivery attempts per minute by outcome; each row stands until the next, newest first"
          timeHeading="Minute"
        />
      </section>
      <section class="card" aria-labelledby="queue-title">
        <h2 id="queue-title">Send queue depth</h2>
        <p class="help">
          Queued sends and broadcasts waiting to go, sampled once a minute; the last minute is the queue now (0: the
          queue was empty, or the hub was not running).
        </p>
        <LineChart
          title={`Send queue depth per minute, ${window}`}
          series={QUEUE_SERIES}
          samples={samplesOf(minutes, (m) => ({ queued: m.queue_depth }))}
          tableCaption="Queued sends per minute; each row stands until the next, newest first"
          timeHeading="Minute"
        />
      </section>
    </>
  )
}

export const OverviewPage = (props: { readonly kind: TokenKind }) => {
  const [hours, setHours] = useState(1)
  const [instanceId, setInstanceId] = useState("")
  const instances = useInstanceChoices(props.kind)
  const series = useResource(
    () => call<Timeseries>("GET", "/api/stats/timeseries", { query: { hours, instance_id: instanceId } }),
    JSON.stringify([hours, instanceId])
  )
  usePolling(true, series.reload, REFRESH_MS, series.loaded)
  // When the answer shown came (each reading replaces `loaded`).
  const readAt = useMemo(() => (series.loaded.state === "ready" ? clock.format(Date.now()) : undefined), [
    series.loaded
  ])
  return (
    <main id="main">
      <PageTitle lead="What the hub did, minute by minute: sends, webhook deliveries and the send queue.">
        Overview
      </PageTitle>
      <form class="overview-controls" aria-label="What the charts show" onSubmit={(event) => event.preventDefault()}>
        <div class="field inline">
          <label for="o-hours">Window</label>
          <select id="o-hours" value={String(hours)} onChange={(e) => setHours(Number(e.currentTarget.value))}>
            {WINDOWS.map((n) => <option key={n} value={String(n)}>Last {hoursText(n)}</option>)}
          </select>
        </div>
        {instances === undefined ? null : (
          <div class="field inline">
            <label for="o-instance">Instance</label>
            <select id="o-instance" value={instanceId} onChange={(e) => setInstanceId(e.currentTarget.value)}>
              <option value="">All instances</option>
              {instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
      </form>
      <p class="help">
        {readAt === undefined
          ? "Reading…"
          : `Read at ${readAt}; read again every ${REFRESH_MS / 1000} seconds while this page is open.`}
      </p>
      <Resource loaded={series.loaded} what="the overview">
        {(value) => (
          <>
            <Totals series={value} />
            <Charts series={value} />
          </>
        )}
      </Resource>
    </main>
  )
}

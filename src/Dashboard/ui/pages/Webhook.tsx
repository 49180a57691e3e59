import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import type { RECOVER_MAX } from "../../../Webhooks/Api.js"
import { call } from "../api.js"
import {
  Badge,
  ConfirmButton,
  ErrorNote,
  isoOfLocalInput,
  localInputOf,
  localZone,
  Outcome,
  PageTitle,
  Resource,
  SecretOnce,
  Time,
  useAction,
  usePolling,
  useResource
} from "../components.js"
import { eventsSummary } from "../eventKinds.js"
import { useLiveFeed } from "../live.js"
import { countText } from "../paging.js"
import { Link, navigate } from "../router.js"
import type { RecoverOutcome, Rotated, Webhook, WebhookDelivery } from "../types.js"
import { DeliveryLog } from "./DeliveryLog.js"
import { answerOf, deliveryTone } from "./DeliveryTable.js"
import {
  choiceOf,
  EventKindsField,
  eventsOf,
  type HeaderRow,
  HeadersField,
  headersOf,
  type KindsChoice,
  rowsOf,
  sameEvents
} from "./WebhookFields.js"
import { HealthPanel, webhookState } from "./WebhookHealth.js"

/** Most deliveries one recover call queues (the type checks it is the hub's value). */
const RECOVER_LIMIT: typeof RECOVER_MAX = 10_000
/** While deliveries are queued, the health is read again this often. */
const POLL_MS = 1500

interface SectionProps {
  readonly webhook: Webhook
  /** The record an action answered. */
  readonly onChanged: (webhook: Webhook) => void
  /** An action queued deliveries: read the record (its health) and the delivery log again. */
  readonly onQueued: () => void
  /** Bumped by onQueued. */
  readonly refresh: number
}

/** The sections of a webhook's page, in order, each a card reached from the page's own menu. */
interface WebhookSection {
  readonly id: string
  readonly title: string
  readonly render: (props: SectionProps) => ComponentChildren
}

const Settings = (props: SectionProps) => {
  const { webhook } = props
  const [name, setName] = useState(webhook.name)
  const [url, setUrl] = useState(webhook.url)
  const [rotated, setRotated] = useState<Rotated | undefined>(undefined)
  const { error, outcome, run } = useAction()
  useEffect(() => {
    setName(webhook.name)
    setUrl(webhook.url)
  }, [webhook.updated_at])

  const patch = (changes: { readonly name?: string; readonly url?: string; readonly active?: boolean }, done: string) =>
    run(() => call<Webhook>("PATCH", `/api/webhooks/${webhook.id}`, { json: changes }), (record) => {
      props.onChanged(record)
      return done
    })
  const rotate = () =>
    run(() => call<Rotated>("POST", `/api/webhooks/${webhook.id}/rotate-secret`), (answer) => {
      setRotated(answer)
      return "A new signing secret was made."
    })
  const remove = () =>
    run(() => call<void>("DELETE", `/api/webhooks/${webhook.id}`), () => {
      navigate("/webhooks")
      return undefined
    })

  return (
    <div class="stack">
      <form
        class="stack"
        aria-label="Edit the webhook"
        onSubmit={(event) => {
          event.preventDefault()
          void patch({ ...(name === webhook.name ? {} : { name }), ...(url === webhook.url ? {} : { url }) }, "Saved.")
        }}
      >
        <div class="row">
          <div class="field">
            <label for="edit-name">Name</label>
            <input
              id="edit-name"
              required
              maxLength={100}
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
            />
          </div>
          <div class="field wide">
            <label for="edit-url">URL</label>
            <input id="edit-url" type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
          </div>
        </div>
        <div>
          <button type="submit" disabled={name === webhook.name && url === webhook.url}>Save changes</button>
        </div>
      </form>
      <div class="actions-row">
        {webhook.active
          ? (
            <button
              type="button"
              class="secondary"
              onClick={() => void patch({ active: false }, "Deactivated: no new deliveries are queued.")}
            >
              Deactivate
            </button>
          )
          : (
            <button
              type="button"
              onClick={() => void patch({ active: true }, "Activated: new events are delivered again.")}
            >
              Activate
            </button>
          )}
        <ConfirmButton
          label="Rotate secret"
          confirmLabel="Make a new secret"
          question="Replace the signing secret? The old one keeps signing for 24 hours."
          tone="normal"
          onConfirm={rotate}
        />
        <ConfirmButton
          label="Delete webhook"
          confirmLabel="Delete for good"
          question={`Delete “${webhook.name}” and cancel its queued deliveries?`}
          onConfirm={remove}
        />
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Refused:" />
      {rotated === undefined ?
        null :
        (
          <SecretOnce title="The new signing secret" secret={rotated.secret} onDone={() => setRotated(undefined)}>
            <p class="muted">
              Deliveries carry both signatures until <Time iso={rotated.previous_secret_expires_at} />.
            </p>
          </SecretOnce>
        )}
    </div>
  )
}

const EventFilter = (props: SectionProps) => {
  const { webhook } = props
  const [choice, setChoice] = useState<KindsChoice>(() => choiceOf(webhook.events))
  const { error, outcome, busy, run } = useAction()
  useEffect(() => setChoice(choiceOf(webhook.events)), [webhook.events.join(",")])
  const events = eventsOf(choice)
  const unchanged = sameEvents(events, webhook.events)
  return (
    <form
      class="stack"
      aria-label="The kinds it receives"
      onSubmit={(event) => {
        event.preventDefault()
        void run(() => call<Webhook>("PATCH", `/api/webhooks/${webhook.id}`, { json: { events } }), (record) => {
          props.onChanged(record)
          return `Saved: it receives ${
            eventsSummary(record.events, record.events.length).toLowerCase().replace(/^all kinds$/, "every kind")
          }.`
        })
      }}
    >
      <p class="muted">Now: {eventsSummary(webhook.events, webhook.events.length)}.</p>
      <EventKindsField id="edit-kinds" value={choice} onChange={setChoice} />
      <ErrorNote error={error} prefix="Not saved:" />
      <Outcome text={outcome} />
      <div>
        <button type="submit" disabled={busy || unchanged}>Save event filter</button>
      </div>
    </form>
  )
}

const CustomHeaders = (props: SectionProps) => {
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

/** What the test's first attempt says, in words. */
const testOutcome = (delivery: WebhookDelivery) => {
  const first = delivery.attempt_log[0]
  if (first === undefined) {
    return `No attempt was logged in time; the test delivery is ${delivery.status} and shows in the delivery log.`
  }
  const answer = first.status_code === null
    ? `no answer (${first.error ?? "unknown error"})`
    : `HTTP ${first.status_code}`
  const ok = first.status_code !== null && first.status_code >= 200 && first.status_code < 300
  if (ok) return `Delivered: the receiver answered ${answer} in ${first.latency_ms} ms.`
  const then = delivery.status === "failed"
    ? "a retry is scheduled"
    : delivery.status === "dead"
    ? "no retry follows"
    : `it is ${delivery.status}`
  return `Not delivered: ${answer} after ${first.latency_ms} ms; ${then}.`
}

const TestEvent = (props: SectionProps) => {
  const { webhook } = props
  const [sent, setSent] = useState<WebhookDelivery | undefined>(undefined)
  const { error, busy, run } = useAction()
  const send = () =>
    run(() => call<WebhookDelivery>("POST", `/api/webhooks/${webhook.id}/test`), (delivery) => {
      setSent(delivery)
      props.onQueued()
      return undefined
    })
  const first = sent?.attempt_log[0]
  return (
    <div class="stack">
      <p>
        Sends a signed test event of kind <code>hub.test</code>{" "}
        through the normal delivery path, whatever kinds the webhook takes, and shows its first attempt. At most one
        test a second.
      </p>
      <div class="actions-row">
        <button type="button" disabled={busy || !webhook.active} onClick={() => void send()}>
          {busy ? "Sending…" : "Send a test event"}
        </button>
        {webhook.active ? null : <span class="help">Activate it first.</span>}
      </div>
      <p class="muted" role="status">{busy ? "Waiting for the first attempt…" : ""}</p>
      <ErrorNote error={error} prefix="Not sent:" />
      <div role="status" aria-live="polite">
        {sent === undefined || busy ? null : (
          <div class="test-result">
            <p>
              <Badge tone={deliveryTone(sent.status)}>{sent.status}</Badge> <span>{testOutcome(sent)}</span>
            </p>
            <dl class="facts">
              <div>
                <dt>Answer</dt>
                <dd>{first === undefined ? <span class="muted">—</span> : answerOf(first)}</dd>
              </div>
              <div>
                <dt>Attempted</dt>
                <dd>
                  <Time iso={first?.started_at} />
                </dd>
              </div>
              <div>
                <dt>webhook-id</dt>
                <dd class="mono">{sent.message_id}</dd>
              </div>
            </dl>
            {first?.response_snippet === null || first?.response_snippet === undefined || first.response_snippet === ""
              ? null
              : (
                <p class="small">
                  Answer body: <span class="mono wrap">{first.response_snippet}</span>
                </p>
              )}
          </div>
        )}
      </div>
    </div>
  )
}

const DAY_MS = 24 * 3600_000

const Recover = (props: SectionProps) => {
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
      <div class="row">
        <div class="field">
          <label for="recover-since">Created from</label>
          <input
            id="recover-since"
            type="datetime-local"
            required
            value={since}
            onInput={(e) => setSince(e.currentTarget.value)}
            aria-describedby="recover-zone"
          />
        </div>
        <div class="field">
          <label for="recover-until">Created before (optional)</label>
          <input
            id="recover-until"
            type="datetime-local"
            value={until}
            onInput={(e) => setUntil(e.currentTarget.value)}
            aria-describedby="recover-zone"
          />
        </div>
      </div>
      <p id="recover-zone" class="help">
        Times are in your time zone ({localZone()}); without an end, the window ends now.
      </p>
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

const webhookSections: ReadonlyArray<WebhookSection> = [
  { id: "health", title: "Health", render: (props) => <HealthPanel webhook={props.webhook} /> },
  {
    id: "deliveries",
    title: "Deliveries",
    render: (props) => <DeliveryLog webhook={props.webhook} refresh={props.refresh} />
  },
  { id: "test", title: "Test", render: (props) => <TestEvent {...props} /> },
  { id: "recover", title: "Recover", render: (props) => <Recover {...props} /> },
  { id: "events", title: "Event filter", render: (props) => <EventFilter {...props} /> },
  { id: "headers", title: "Custom headers", render: (props) => <CustomHeaders {...props} /> },
  { id: "settings", title: "Settings", render: (props) => <Settings {...props} /> }
]

export const WebhookPage = (props: { readonly id: string }) => {
  const loaded = useResource(() => call<Webhook>("GET", `/api/webhooks/${props.id}`), props.id)
  const [refresh, setRefresh] = useState(0)
  const { entries } = useLiveFeed()
  const newest = entries[0]
  const webhook = loaded.loaded.state === "ready" ? loaded.loaded.value : undefined

  // The health moves with every delivery: read it again when an event of its instance arrives,
  // and while anything is queued.
  useEffect(() => {
    if (newest?.kind === "event" && newest.event.instanceId === webhook?.instance_id) void loaded.reload()
  }, [newest])
  const queued = webhook !== undefined && webhook.queued.pending + webhook.queued.failed > 0
  usePolling(queued, loaded.reload, POLL_MS, loaded.loaded)

  const onQueued = () => {
    setRefresh((n) => n + 1)
    void loaded.reload()
  }

  return (
    <main id="main">
      <p class="breadcrumb">
        <Link to="/webhooks">← Webhooks</Link>
      </p>
      <Resource loaded={loaded.loaded} what="the webhook">
        {(webhook) => (
          <>
            <PageTitle lead={<span class="mono">{webhook.url}</span>}>{webhook.name} {webhookState(webhook)}</PageTitle>
            <dl class="facts">
              <div>
                <dt>Webhook id</dt>
                <dd class="mono">{webhook.id}</dd>
              </div>
              <div>
                <dt>Instance</dt>
                <dd class="mono">{webhook.instance_id}</dd>
              </div>
              <div>
                <dt>Receives</dt>
                <dd>{eventsSummary(webhook.events)}</dd>
              </div>
              <div>
                <dt>Created</dt>
                <dd>
                  <Time iso={webhook.created_at} />
                </dd>
              </div>
              <div>
                <dt>Updated</dt>
                <dd>
                  <Time iso={webhook.updated_at} />
                </dd>
              </div>
            </dl>
            <nav class="section-nav" aria-label="Sections of this webhook">
              <ul>
                {webhookSections.map((section) => (
                  <li key={section.id}>
                    <a href={`#${section.id}`}>{section.title}</a>
                  </li>
                ))}
              </ul>
            </nav>
            {webhookSections.map((section) => (
              <section key={section.id} id={section.id} class="card" aria-labelledby={`${section.id}-title`}>
                <h2 id={`${section.id}-title`}>{section.title}</h2>
                {section.render({ webhook, onChanged: loaded.replace, onQueued, refresh })}
              </section>
            ))}
          </>
        )}
      </Resource>
    </main>
  )
}

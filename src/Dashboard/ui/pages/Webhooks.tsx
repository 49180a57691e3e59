import { useState } from "preact/hooks"
import { call } from "../api.js"
import { Ago, ErrorNote, Outcome, PageTitle, Resource, SecretOnce, useAction, useResource } from "../components.js"
import { eventsSummary, FIELD_KINDS, MESSAGE_KINDS } from "../eventKinds.js"
import { useInstanceChoices } from "../instances.js"
import { Link } from "../router.js"
import type { Instance, TokenKind, Webhook, WebhookWithSecret } from "../types.js"
import {
  EventKindsField,
  eventsOf,
  EVERY_KIND,
  type HeaderRow,
  HeadersField,
  headersOf,
  type KindsChoice
} from "./WebhookFields.js"
import { queuedSummary, recentSummary, webhookState } from "./WebhookHealth.js"

const CreateWebhook = (
  props: {
    readonly instances: ReadonlyArray<Instance> | undefined
    readonly onCreated: (webhook: WebhookWithSecret) => void
  }
) => {
  const [name, setName] = useState("")
  const [url, setUrl] = useState("")
  const [polled, setPolled] = useState(false)
  const [instanceId, setInstanceId] = useState("")
  const [kinds, setKinds] = useState<KindsChoice>(EVERY_KIND)
  const [headers, setHeaders] = useState<ReadonlyArray<HeaderRow>>([])
  const { error, busy, run } = useAction()
  const submit = (event: Event) => {
    event.preventDefault()
    const custom = headersOf(headers)
    const json = {
      name,
      // A poll webhook has no url and no custom headers: nothing is sent to it.
      ...(polled ? { kind: "poll" } : { url }),
      ...(instanceId === "" ? {} : { instance_id: instanceId }),
      // Every kind is the API's default: only a choice is sent.
      ...(kinds.every ? {} : { events: eventsOf(kinds) }),
      ...(polled || Object.keys(custom).length === 0 ? {} : { headers: custom })
    }
    void run(() => call<WebhookWithSecret>("POST", "/api/webhooks", { json }), (created) => {
      setName("")
      setUrl("")
      setKinds(EVERY_KIND)
      setHeaders([])
      props.onCreated(created)
      return undefined
    })
  }
  return (
    <form class="card stack" onSubmit={submit} aria-labelledby="create-webhook-title">
      <h2 id="create-webhook-title">Add a webhook</h2>
      <div class="row">
        <div class="field">
          <label for="webhook-name">Name</label>
          <input
            id="webhook-name"
            required
            maxLength={100}
            value={name}
            onInput={(e) => setName(e.currentTarget.value)}
          />
        </div>
        {polled ? null : (
          <div class="field wide">
            <label for="webhook-url">URL</label>
            <input
              id="webhook-url"
              type="url"
              required
              placeholder="https://example.com/hooks/whatsapp"
              aria-describedby="webhook-url-help"
              value={url}
              onInput={(e) => setUrl(e.currentTarget.value)}
            />
            <p id="webhook-url-help" class="help">
              Each delivery is posted here, signed (Standard Webhooks), and retried until the receiver answers 2xx.
            </p>
          </div>
        )}
        {props.instances === undefined ? null : (
          <div class="field">
            <label for="webhook-instance">Instance</label>
            <select
              id="webhook-instance"
              required
              value={instanceId}
              onChange={(e) => setInstanceId(e.currentTarget.value)}
            >
              <option value="">Choose…</option>
              {props.instances.map((i) => <option key={i.id} value={i.id}>{i.name} ({i.phone_number_id})</option>)}
            </select>
          </div>
        )}
      </div>
      <div class="check">
        <input
          id="webhook-polled"
          type="checkbox"
          checked={polled}
          aria-describedby="webhook-polled-help"
          onChange={(e) => setPolled(e.currentTarget.checked)}
        />
        <label for="webhook-polled">Poll it instead (no URL)</label>
        <span id="webhook-polled-help" class="help">
          Nothing is pushed: its events wait in the hub and are read with GET /api/webhooks/&#123;id&#125;/poll, for
          receivers behind a firewall, serverless functions or local development.
        </span>
      </div>
      <EventKindsField id="create-kinds" value={kinds} onChange={setKinds} />
      {polled ? null : <HeadersField id="create-headers" rows={headers} onChange={setHeaders} />}
      <ErrorNote error={error} prefix="Not created:" />
      <div>
        <button type="submit" disabled={busy}>{busy ? "Adding…" : "Add webhook"}</button>
      </div>
    </form>
  )
}

/** Which kind the listed webhooks receive: any, or one (GET /api/webhooks?event=). */
const ReceivingFilter = (props: { readonly receives: string; readonly onChange: (kind: string) => void }) => (
  <div class="field inline">
    <label for="webhook-receives">Receiving</label>
    <select id="webhook-receives" value={props.receives} onChange={(e) => props.onChange(e.currentTarget.value)}>
      <option value="">Any kind</option>
      <optgroup label="Messages">
        {MESSAGE_KINDS.map((kind) => <option key={kind} value={kind}>{kind}</option>)}
      </optgroup>
      <optgroup label="Other changes">
        {FIELD_KINDS.map((kind) => <option key={kind} value={kind}>{kind}</option>)}
      </optgroup>
    </select>
  </div>
)

/** The webhooks listed, each with its state and health; `receives` is the kind they were filtered by, if any. */
const WebhookTable = (props: {
  readonly webhooks: ReadonlyArray<Webhook>
  readonly receives: string
  readonly showInstance: boolean
  readonly instanceLabel: (id: string) => string
}) => {
  const { receives, showInstance } = props
  return (
    <div class="table-wrap">
      <table class="responsive">
        <caption class="visually-hidden">Webhooks{receives === "" ? "" : ` receiving ${receives}`}</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">URL</th>
            {showInstance ? <th scope="col">Instance</th> : null}
            <th scope="col">State</th>
            <th scope="col">Receives</th>
            <th scope="col">Last 24 hours</th>
            <th scope="col">Queued</th>
            <th scope="col">Last success</th>
          </tr>
        </thead>
        <tbody>
          {props.webhooks.map((webhook) => (
            <tr key={webhook.id}>
              <td data-label="Name">
                <Link to={`/webhooks/${webhook.id}`}>{webhook.name}</Link>
              </td>
              <td data-label="URL" class="mono truncate" title={webhook.url}>
                {webhook.kind === "poll" ? <span class="muted">polled</span> : webhook.url}
              </td>
              {showInstance ? <td data-label="Instance">{props.instanceLabel(webhook.instance_id)}</td> : null}
              <td data-label="State">{webhookState(webhook)}</td>
              <td data-label="Receives" title={eventsSummary(webhook.events, webhook.events.length)}>
                {eventsSummary(webhook.events)}
              </td>
              <td data-label="Last 24 hours">{recentSummary(webhook)}</td>
              <td data-label="Queued">{queuedSummary(webhook)}</td>
              <td data-label="Last success">
                <Ago iso={webhook.last_success_at} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.webhooks.length === 0
        ? <p class="muted">{receives === "" ? "No webhooks yet." : `No webhook receives ${receives}.`}</p>
        : null}
    </div>
  )
}

export const WebhooksPage = (props: { readonly kind: TokenKind }) => {
  const [receives, setReceives] = useState("")
  const webhooks = useResource(
    () => call<{ readonly data: ReadonlyArray<Webhook> }>("GET", "/api/webhooks", { query: { event: receives } }),
    `webhooks ${receives}`
  )
  const choices = useInstanceChoices(props.kind)
  const [created, setCreated] = useState<WebhookWithSecret | undefined>(undefined)
  // An instance token's webhooks are all of its own instance.
  const showInstance = props.kind !== "instance"
  const instanceLabel = (id: string) => {
    const instance = choices?.find((i) => i.id === id)
    return instance === undefined ? id : instance.name
  }
  return (
    <main id="main">
      <PageTitle lead="The URLs that receive the upstream events of an instance, their health, and what was delivered to them.">
        Webhooks
      </PageTitle>
      {created === undefined
        ? (
          <CreateWebhook
            instances={choices}
            onCreated={(webhook) => {
              setCreated(webhook)
              void webhooks.reload()
            }}
          />
        )
        : (
          <SecretOnce
            title={`The signing secret of “${created.name}”`}
            secret={created.secret}
            onDone={() => setCreated(undefined)}
          >
            <p>
              Receivers check each delivery's <code>webhook-signature</code> with it.{" "}
              <Link to={`/webhooks/${created.id}`}>Open “{created.name}”</Link>
            </p>
          </SecretOnce>
        )}
      <Outcome text={created === undefined ? undefined : `Webhook “${created.name}” added.`} />
      <section aria-labelledby="webhook-list-title">
        <div class="toolbar">
          <h2 id="webhook-list-title">Webhooks</h2>
          <div class="actions-row">
            <ReceivingFilter receives={receives} onChange={setReceives} />
            <Link to="/deliveries">Search all deliveries</Link>
          </div>
        </div>
        <Resource loaded={webhooks.loaded} what="the webhooks">
          {(list) => (
            <WebhookTable
              webhooks={list.data}
              receives={receives}
              showInstance={showInstance}
              instanceLabel={instanceLabel}
            />
          )}
        </Resource>
      </section>
    </main>
  )
}

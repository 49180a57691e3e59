import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import { type ApiError, call } from "../api.js"
import { ConfirmButton, ErrorNote, Outcome, PageTitle, Resource, SecretOnce, Time, useResource } from "../components.js"
import { Link, navigate } from "../router.js"
import type { Rotated, Webhook } from "../types.js"
import { DeliveryLog } from "./Deliveries.js"
import { webhookState } from "./Webhooks.js"

interface SectionProps {
  readonly webhook: Webhook
  readonly onChanged: (webhook: Webhook) => void
}

/**
 * The sections of a webhook's page, in order, each a card reached from the page's own menu. The
 * webhook operations to come (health, event filters, recover, test events) add theirs here.
 */
export interface WebhookSection {
  readonly id: string
  readonly title: string
  readonly render: (props: SectionProps) => ComponentChildren
}

const Settings = (props: SectionProps) => {
  const { webhook } = props
  const [name, setName] = useState(webhook.name)
  const [url, setUrl] = useState(webhook.url)
  const [error, setError] = useState<ApiError | undefined>(undefined)
  const [outcome, setOutcome] = useState<string | undefined>(undefined)
  const [rotated, setRotated] = useState<Rotated | undefined>(undefined)
  useEffect(() => {
    setName(webhook.name)
    setUrl(webhook.url)
  }, [webhook.updated_at])

  const patch = async (changes: { readonly name?: string; readonly url?: string; readonly active?: boolean }, done: string) => {
    setError(undefined)
    setOutcome(undefined)
    const result = await call<Webhook>("PATCH", `/api/webhooks/${webhook.id}`, { json: changes })
    if (!result.ok) return setError(result.error)
    setOutcome(done)
    props.onChanged(result.value)
  }
  const rotate = async () => {
    setError(undefined)
    const result = await call<Rotated>("POST", `/api/webhooks/${webhook.id}/rotate-secret`)
    if (!result.ok) return setError(result.error)
    setRotated(result.value)
    setOutcome("A new signing secret was made.")
  }
  const remove = async () => {
    setError(undefined)
    const result = await call<void>("DELETE", `/api/webhooks/${webhook.id}`)
    if (!result.ok) return setError(result.error)
    navigate("/webhooks")
  }

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
            <input id="edit-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} />
          </div>
          <div class="field wide">
            <label for="edit-url">URL</label>
            <input id="edit-url" type="url" required value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
          </div>
        </div>
        <div><button type="submit" disabled={name === webhook.name && url === webhook.url}>Save changes</button></div>
      </form>
      <div class="actions-row">
        {webhook.active
          ? <button type="button" class="secondary" onClick={() => void patch({ active: false }, "Deactivated: no new deliveries are queued.")}>Deactivate</button>
          : <button type="button" onClick={() => void patch({ active: true }, "Activated: new events are delivered again.")}>Activate</button>}
        <ConfirmButton
          label="Rotate secret"
          confirmLabel="Make a new secret"
          question="Replace the signing secret? The old one keeps signing for 24 hours."
          tone="normal"
          onConfirm={rotate}
        />
        <ConfirmButton label="Delete webhook" confirmLabel="Delete for good" question={`Delete “${webhook.name}” and cancel its queued deliveries?`} onConfirm={remove} />
      </div>
      <Outcome text={outcome} />
      <ErrorNote error={error} prefix="Refused:" />
      {rotated === undefined ? null : (
        <SecretOnce title="The new signing secret" secret={rotated.secret} onDone={() => setRotated(undefined)}>
          <p class="muted">Deliveries carry both signatures until <Time iso={rotated.previous_secret_expires_at} />.</p>
        </SecretOnce>
      )}
    </div>
  )
}

export const webhookSections: ReadonlyArray<WebhookSection> = [
  { id: "deliveries", title: "Deliveries", render: (props) => <DeliveryLog webhook={props.webhook} /> },
  { id: "settings", title: "Settings", render: (props) => <Settings {...props} /> }
]

export const WebhookPage = (props: { readonly id: string }) => {
  const loaded = useResource(() => call<Webhook>("GET", `/api/webhooks/${props.id}`), props.id)
  const [changed, setChanged] = useState<Webhook | undefined>(undefined)
  return (
    <main id="main">
      <p class="breadcrumb"><Link to="/webhooks">← Webhooks</Link></p>
      <Resource loaded={loaded.loaded} what="the webhook">
        {(fetched) => {
          const webhook = changed?.id === fetched.id && changed.updated_at >= fetched.updated_at ? changed : fetched
          return (
            <>
              <PageTitle lead={<span class="mono">{webhook.url}</span>}>{webhook.name} {webhookState(webhook)}</PageTitle>
              <dl class="facts">
                <div><dt>Webhook id</dt><dd class="mono">{webhook.id}</dd></div>
                <div><dt>Instance</dt><dd class="mono">{webhook.instance_id}</dd></div>
                <div><dt>Created</dt><dd><Time iso={webhook.created_at} /></dd></div>
                <div><dt>Updated</dt><dd><Time iso={webhook.updated_at} /></dd></div>
              </dl>
              <nav class="section-nav" aria-label="Sections of this webhook">
                {webhookSections.map((section) => <a key={section.id} href={`#${section.id}`}>{section.title}</a>)}
              </nav>
              {webhookSections.map((section) => (
                <section key={section.id} id={section.id} class="card" aria-labelledby={`${section.id}-title`}>
                  <h2 id={`${section.id}-title`}>{section.title}</h2>
                  {section.render({ webhook, onChanged: setChanged })}
                </section>
              ))}
            </>
          )
        }}
      </Resource>
    </main>
  )
}

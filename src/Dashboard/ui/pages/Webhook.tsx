/** A webhook's page: its facts, then its sections (health, deliveries, actions, settings), each a card. */
import type { ComponentChildren } from "preact"
import { useEffect, useState } from "preact/hooks"
import { call } from "../api.js"
import { PageTitle, Resource, Time, usePolling, useResource } from "../components.js"
import { eventsSummary } from "../eventKinds.js"
import { useLiveFeed } from "../live.js"
import { Link } from "../router.js"
import type { Webhook } from "../types.js"
import { DeliveryLog } from "./DeliveryLog.js"
import { HealthPanel, webhookState } from "./WebhookHealth.js"
import { CustomHeaders } from "./webhookSections/CustomHeaders.js"
import { EventFilter } from "./webhookSections/EventFilter.js"
import { Recover } from "./webhookSections/Recover.js"
import type { SectionProps } from "./webhookSections/SectionProps.js"
import { Settings } from "./webhookSections/Settings.js"
import { TestEvent } from "./webhookSections/TestEvent.js"

/** While deliveries are queued, the health is read again this often. */
const POLL_MS = 1500

/** The sections of a webhook's page, in order, each a card reached from the page's own menu. */
interface WebhookSection {
  readonly id: string
  readonly title: string
  readonly render: (props: SectionProps) => ComponentChildren
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

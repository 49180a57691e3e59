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
import { PollEvents } from "./webhookSections/PollEvents.js"
import { Recover } from "./webhookSections/Recover.js"
import { Replay } from "./webhookSections/Replay.js"
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
  /** Only for a webhook pushed to, or only for one polled; both when undefined. */
  readonly only?: Webhook["kind"]
}

const webhookSections: ReadonlyArray<WebhookSection> = [
  { id: "health", title: "Health", render: (props) => <HealthPanel webhook={props.webhook} />, only: "push" },
  { id: "poll", title: "Poll", render: (props) => <PollEvents {...props} />, only: "poll" },
  {
    id: "deliveries",
    title: "Deliveries",
    render: (props) => <DeliveryLog webhook={props.webhook} refresh={props.refresh} />,
    only: "push"
  },
  { id: "test", title: "Test", render: (props) => <TestEvent {...props} />, only: "push" },
  { id: "recover", title: "Recover", render: (props) => <Recover {...props} />, only: "push" },
  { id: "replay", title: "Replay", render: (props) => <Replay {...props} />, only: "push" },
  { id: "events", title: "Event filter", render: (props) => <EventFilter {...props} /> },
  { id: "headers", title: "Custom headers", render: (props) => <CustomHeaders {...props} />, only: "push" },
  { id: "settings", title: "Settings", render: (props) => <Settings {...props} /> }
]

const sectionsOf = (webhook: Webhook) =>
  webhookSections.filter((section) => section.only === undefined || section.only === webhook.kind)

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
            <PageTitle
              lead={webhook.kind === "poll" ? "Polled: nothing is pushed" : <span class="mono">{webhook.url}</span>}
            >
              {webhook.name} {webhookState(webhook)}
            </PageTitle>
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
                {sectionsOf(webhook).map((section) => (
                  <li key={section.id}>
                    <a href={`#${section.id}`}>{section.title}</a>
                  </li>
                ))}
              </ul>
            </nav>
            {sectionsOf(webhook).map((section) => (
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

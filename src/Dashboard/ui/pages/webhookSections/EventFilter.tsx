/** The kinds of change a webhook receives (its `events`), edited. */
import { useEffect, useState } from "preact/hooks"
import { call } from "../../api.js"
import { ErrorNote, Outcome, useAction } from "../../components.js"
import { eventsSummary } from "../../eventKinds.js"
import type { Webhook } from "../../types.js"
import { choiceOf, EventKindsField, eventsOf, type KindsChoice, sameEvents } from "../WebhookFields.js"
import type { SectionProps } from "./SectionProps.js"

export const EventFilter = (props: SectionProps) => {
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

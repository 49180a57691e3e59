/** Sends a webhook a signed test event and shows its first attempt. */
import { useState } from "preact/hooks"
import { call } from "../../api.js"
import { Badge, ErrorNote, Time, useAction } from "../../components.js"
import type { WebhookDelivery } from "../../types.js"
import { answerOf, deliveryTone } from "../DeliveryTable.js"
import type { SectionProps } from "./SectionProps.js"

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

export const TestEvent = (props: SectionProps) => {
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

/**
 * A webhook's health as its record says it: whether it is active (and, if not, why, in words), when
 * a delivery last succeeded, since when it has been failing, the last 24 hours' attempts by outcome
 * and what is queued now.
 */
import type { QUEUED_CAP } from "../../../Webhooks/Deliveries.js"
import { ago, Badge, Time, type Tone } from "../components.js"
import { countText } from "../paging.js"
import type { DisabledReason, Webhook } from "../types.js"

/** The hub counts queued deliveries up to this (the type checks it is the hub's value). */
const QUEUED_LIMIT: typeof QUEUED_CAP = 1_000

/** Why a webhook is inactive, in words: short for a badge, long for its page. */
const disabledReasons: Readonly<Record<DisabledReason, { readonly short: string; readonly long: string }>> = {
  gone_410: {
    short: "receiver gone (410)",
    long: "The receiver answered 410 Gone, so the hub turned the webhook off."
  },
  failing_too_long: {
    short: "failing too long",
    long: "No delivery succeeded for too long (HUB_WEBHOOK_DISABLE_AFTER), so the hub turned the webhook off."
  },
  manual: {
    short: "turned off by hand",
    long: "It was deactivated by hand."
  }
}

export const webhookState = (webhook: Webhook) => {
  if (webhook.active) {
    return webhook.failing_since === null
      ? <Badge tone="ok">active</Badge>
      : <Badge tone="warn">active · failing</Badge>
  }
  const reason = webhook.disabled_reason === null ? undefined : disabledReasons[webhook.disabled_reason]
  return (
    <Badge tone={webhook.disabled_reason === "manual" ? "neutral" : "bad"}>
      inactive{reason === undefined ? "" : ` · ${reason.short}`}
    </Badge>
  )
}

const queuedCount = (n: number, capped: boolean) => countText(n, capped && n >= QUEUED_LIMIT)

/** The last 24 hours in one line, for the list: "12 succeeded · 2 retried · 1 dead". */
export const recentSummary = (webhook: Webhook) => {
  const { dead, failed, succeeded } = webhook.deliveries_24h
  if (succeeded + failed + dead === 0) return "No attempts"
  return [
    `${countText(succeeded, false)} succeeded`,
    ...(failed > 0 ? [`${countText(failed, false)} retried`] : []),
    ...(dead > 0 ? [`${countText(dead, false)} dead`] : [])
  ].join(" · ")
}

/** What is queued now in one line, for the list. */
export const queuedSummary = (webhook: Webhook) => {
  const { capped, failed, pending } = webhook.queued
  if (pending + failed === 0) return "Nothing queued"
  return [
    ...(pending > 0 ? [`${queuedCount(pending, capped === true)} pending`] : []),
    ...(failed > 0 ? [`${queuedCount(failed, capped === true)} awaiting a retry`] : [])
  ].join(" · ")
}

const Stat = (
  props: { readonly value: string; readonly label: string; readonly tone: Tone; readonly help: string }
) => (
  <li class={`stat stat-${props.tone}`}>
    <span class="stat-value">{props.value}</span> <span class="stat-label">{props.label}</span>{" "}
    <span class="stat-help">{props.help}</span>
  </li>
)

export const HealthPanel = (props: { readonly webhook: Webhook }) => {
  const { webhook } = props
  const recent = webhook.deliveries_24h
  const queued = webhook.queued
  const reason = webhook.disabled_reason === null ? undefined : disabledReasons[webhook.disabled_reason]
  return (
    <div class="stack">
      <dl class="facts">
        <div>
          <dt>State</dt>
          <dd>{webhookState(webhook)}</dd>
        </div>
        <div>
          <dt>Last success</dt>
          <dd>
            {webhook.last_success_at === null ? <span class="muted">None recorded</span> : (
              <>
                <Time iso={webhook.last_success_at} /> <span class="muted">({ago(webhook.last_success_at)})</span>
              </>
            )}
          </dd>
        </div>
        <div>
          <dt>Failing since</dt>
          <dd>
            {webhook.failing_since === null ? <span class="muted">Not failing</span> : (
              <>
                <Time iso={webhook.failing_since} /> <span class="muted">({ago(webhook.failing_since)})</span>
              </>
            )}
          </dd>
        </div>
      </dl>
      {webhook.active || reason === undefined
        ? null
        : <p class="note note-warn">{reason.long} Activate it under Settings to deliver again.</p>}
      <div class="stat-groups">
        <div>
          <h3>Attempts in the last 24 hours</h3>
          <ul class="stats">
            <Stat value={countText(recent.succeeded, false)} label="succeeded" tone="ok" help="answered 2xx" />
            <Stat
              value={countText(recent.failed, false)}
              label="retried"
              tone="warn"
              help="failed, a retry was scheduled"
            />
            <Stat value={countText(recent.dead, false)} label="dead" tone="bad" help="failed, given up" />
          </ul>
        </div>
        <div>
          <h3>Queued now</h3>
          <ul class="stats">
            <Stat
              value={queuedCount(queued.pending, queued.capped === true)}
              label="pending"
              tone="info"
              help="waiting for an attempt"
            />
            <Stat
              value={queuedCount(queued.failed, queued.capped === true)}
              label="awaiting a retry"
              tone="warn"
              help="failed, retried later"
            />
            {webhook.ordering === "per_contact"
              ? (
                <Stat
                  value={queuedCount(queued.held, queued.capped === true)}
                  label="held in order"
                  tone="info"
                  help="each behind an earlier delivery about the same person"
                />
              )
              : null}
          </ul>
        </div>
      </div>
    </div>
  )
}
